// Loaded with `node --import`: records every module the process resolves, in order, to the file
// named by RECORD_IMPORTS_FILE (test/process/tracing.test.ts reads it).
import { register } from 'node:module';

register('./record-imports-hook.mjs', import.meta.url, { data: { out: process.env.RECORD_IMPORTS_FILE } });

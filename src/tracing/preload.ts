import { register } from 'node:module';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { packageVersion } from '../version.js';
import { installTracing } from './index.js';
import { otelTracing } from './otel.js';
import { createSdk } from './sdk.js';

// Loaded by bin/cards-sync.js, and only when the OTEL_* variables ask for traces (wanted.ts),
// before the application is imported: the instrumentations must be in place before pg and pino
// are. This is the one module with side effects at import time besides src/main.ts.
//
// The application is ESM, so patching `require` is not enough: import-in-the-middle's loader
// hook intercepts the imports, and only of the modules an instrumentation asked for (the
// message channel tells the hook's thread which ones, and is waited on before going on).

const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

const version = packageVersion();
const sdk = createSdk(process.env, version);
sdk.start();
await waitForAllMessagesAcknowledged();

let flushed: Promise<void> | undefined;
installTracing(otelTracing(version, () => (flushed ??= sdk.shutdown().catch(() => {}))));

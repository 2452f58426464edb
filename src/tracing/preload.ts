import { register } from 'node:module';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { packageVersion } from '../shared/index.js';
import { droppedLine } from './exporter-env.js';
import { installTracing } from './index.js';
import { otelTracing } from './otel.js';
import { createSdk, startSdk } from './sdk.js';

// Loaded by bin/cards-sync.js, and only when the OTEL_* variables ask for traces (wanted.ts),
// before the application is imported: the instrumentations must be in place before pg and pino
// are. This is the one module with side effects at import time besides src/cli/main.ts.
//
// The application is ESM, so patching `require` is not enough: import-in-the-middle's loader
// hook intercepts the imports, and only of the modules an instrumentation asked for (the
// message channel tells the hook's thread which ones, and is waited on before going on).

const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

// The worker and the admin server run until stopped and keep the SDK's export timeout. Every
// other command is short: its spans get about a second to leave at its end, and when they do not
// (a Collector down or not answering), one line says so and the command exits as it would have.
const LONG_RUNNING = new Set(['worker', 'serve']);
const SHORT_COMMAND_EXPORT_MS = 1000;
const boundMs = LONG_RUNNING.has(process.argv[2] ?? '') ? undefined : SHORT_COMMAND_EXPORT_MS;

const version = packageVersion();
const sdk = createSdk(process.env, version);
startSdk(sdk, process.env, boundMs);
await waitForAllMessagesAcknowledged();

let flushed: Promise<void> | undefined;
const flush = () =>
  (flushed ??= sdk.shutdown().catch((error: unknown) => {
    if (boundMs !== undefined) process.stderr.write(`${droppedLine(error, boundMs)}\n`);
  }));
installTracing(otelTracing(version, flush));

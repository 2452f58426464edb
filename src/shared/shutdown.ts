import { tracing } from '../tracing/index.js';

/**
 * Runs `stop` once on the first SIGINT or SIGTERM, then exits with its result code; a second
 * signal while stopping exits at once. A stop that outlives `deadlineMs` is cut short (exit 1).
 */
export function onShutdown(
  stop: (signal: NodeJS.Signals) => Promise<number | undefined>,
  deadlineMs = 30_000,
): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    stopping = true;
    const timer = setTimeout(() => process.exit(1), deadlineMs);
    timer.unref();
    // Spans still buffered are exported before the exit (a no-op while tracing is off).
    const exit = (code: number) =>
      void tracing()
        .flush()
        .finally(() => process.exit(code));
    stop(signal).then(
      (code) => exit(code ?? 0),
      () => exit(1),
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

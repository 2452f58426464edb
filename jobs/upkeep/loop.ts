// A worker's periodic upkeep of a table partitioned by day (the ledger's, the change events'):
// one pass at a time, now and every interval, a failed pass left for the next.

/** A running upkeep: `stop()` ends the timer and waits for the pass under way. */
export interface Upkeep {
  stop(): Promise<void>;
}

/**
 * Runs `pass` now and every `o.everyMs` (no default: each upkeep says its own); a pass still
 * running when the timer fires is not doubled. A pass that fails goes to `o.onError` (which should
 * say it will be tried again at the next pass).
 */
export function startUpkeep(
  pass: () => Promise<void>,
  o: { everyMs: number; onError: (error: unknown) => void },
): Upkeep {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= pass()
      .catch(o.onError)
      .finally(() => {
        running = undefined;
      });
  };
  run();
  const timer = setInterval(run, o.everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

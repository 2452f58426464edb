import type pg from 'pg';

/**
 * Postgres's clock, for ordering answers. Which of two answers of one subscriber is newer is
 * decided by when their fetches started, and a host's own clock cannot say that: a host 10
 * minutes fast made every other host's syncs `superseded` for 10 minutes. Every process asks the
 * one server instead.
 *
 * Callers that ask at the same time share one `select clock_timestamp()`. A caller never shares a
 * query already on its way: its answer could be older than the caller's question, and the time
 * must be taken after the caller asked (an answer fetched after another one ended must get a
 * later time than that one's).
 *
 * While tracing is on, a round that a caller starts is traced in that caller's trace; the rounds
 * that follow on, for whoever asked meanwhile, run in no trace, not in the first caller's: the
 * caller hands in how to run outside any trace (src/tracing `detached`), as db/ knows no tracing.
 */
export interface DbClock {
  /** Postgres's `clock_timestamp()`, read after this call began. */
  now(): Promise<Date>;
}

/** What the clock needs of tracing. */
export interface ClockOptions {
  /** Runs `fn` outside any trace (src/tracing `tracing().detached`). */
  detached(fn: () => void): void;
}

export function createDbClock(pool: pg.Pool, options: ClockOptions): DbClock {
  let waiting: { resolve(at: Date): void; reject(error: unknown): void }[] = [];
  let asking = false;
  const ask = (): void => {
    if (asking || waiting.length === 0) return;
    asking = true;
    const round = waiting;
    waiting = [];
    pool
      .query<{ now: Date }>({ name: 'cards-sync-clock', text: 'select clock_timestamp() as now' })
      .then(
        (r) => {
          for (const w of round) w.resolve(r.rows[0]!.now);
        },
        (error: unknown) => {
          for (const w of round) w.reject(error);
        },
      )
      .finally(() => {
        asking = false;
        options.detached(ask);
      });
  };
  return {
    now: () =>
      new Promise<Date>((resolve, reject) => {
        waiting.push({ resolve, reject });
        ask();
      }),
  };
}

const clocks = new WeakMap<pg.Pool, DbClock>();

/** The one {@link DbClock} of a pool (made with the options of the first call). */
export function dbClock(pool: pg.Pool, options: ClockOptions): DbClock {
  let clock = clocks.get(pool);
  if (!clock) {
    clock = createDbClock(pool, options);
    clocks.set(pool, clock);
  }
  return clock;
}

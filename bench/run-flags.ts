import { benchRedis, databaseFlag, parseFlags, REDIS_FLAG, wholeNumber } from './harness.js';

// The flags of `npm run bench` (bench/run.ts), checked, and what the run takes from them.

/** The command line, each number checked (a one-line refusal, exit 2, of a bad one). */
export function runFlags() {
  const { values } = parseFlags({
    options: {
      subscribers: { type: 'string', default: '20000' },
      cards: { type: 'string', default: '5' },
      // Jobs in flight per worker. 64, not the worker's default 16: at 16 every pipeline, the ceiling
      // included, is bound by one job's latency rather than by what the machine can do.
      concurrency: { type: 'string', default: '64' },
      /** Sizes of the scaling curve (cards-sync alone), comma-separated. */
      curve: { type: 'string' },
      /** Where the curve's SVG chart goes. */
      chart: { type: 'string', default: 'bench/curve.svg' },
      /**
       * Rounds of the pipelines, one after another (r, a, c, c unchanged, f; b in the first only): the
       * ratios are taken within each round and their median is reported, so that a drift of the
       * shared machine's speed during one pipeline does not decide the verdict.
       */
      rounds: { type: 'string', default: '3' },
      /**
       * Enqueue every pipeline's jobs as r's are (a plain addBulk, BullMQ's default job options), to
       * tell what the product's job options cost from what its fetch path costs.
       */
      'plain-jobs': { type: 'boolean', default: false },
      /** Comma-separated subset of pipelines to run (r,a,b,c,f), for profiling one of them. */
      only: { type: 'string' },
      /**
       * `CHANGE_EVENTS` of cards-sync's worker (c): `off`, the product's default, or `on`, to
       * measure what the outbox adds to a sync.
       */
      'change-events': { type: 'string', default: 'off' },
      /** Write a V8 CPU profile of each pipeline's worker process into this folder. */
      'cpu-prof': { type: 'string' },
      ...databaseFlag('cards_sync_bench'),
      ...REDIS_FLAG,
    },
  });
  const n = wholeNumber('subscribers', values.subscribers, 1);
  const rounds = wholeNumber('rounds', values.rounds, 1);
  const k = wholeNumber('cards', values.cards, 0);
  wholeNumber('concurrency', values.concurrency, 1);
  if (values['change-events'] !== 'on' && values['change-events'] !== 'off') {
    process.stderr.write(
      `bench: --change-events takes on or off, not ${JSON.stringify(values['change-events'])}\n`,
    );
    process.exit(2);
  }
  const databaseUrl = values['database-url']!;
  const bench = benchRedis(values['redis-url']);
  return { values, n, rounds, k, databaseUrl, bench };
}

export type RunFlags = ReturnType<typeof runFlags>;

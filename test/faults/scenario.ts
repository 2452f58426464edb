import { expect, inject } from 'vitest';
import type { DbHandle } from '../../db/client.js';
import type { CardRow } from '../../db/sync/batch-read.js';
import { enqueueSyncs } from '../../jobs/sync/queue.js';
import { queueIsIdle } from '../../jobs/sync/worker.js';
import type { SavedCard } from '../../src/api/schema.js';
import type { RedisConfig } from '../../src/config/redis.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { API_KEY, CARD_TOKEN_KEYS, testTokens } from '../support/fixtures.js';
import { type CliProcess, startCli, testQueue, waitFor } from '../support/queue-helpers.js';
import { recordFaultRow } from './report.js';
import { secretsIn } from './secrets.js';

// The common frame of a fault scenario: a mock API process, a queue of N subscribers, worker
// processes started and stopped by the scenario, and the closing check of every subscriber's rows
// against what the API says.

export interface ScenarioOptions {
  db: { url: string; handle: DbHandle };
  cleanups: (() => Promise<unknown>)[];
  subscribers: number;
  firstId: number;
  /** Extra flags of the mock API (latency, faults). */
  apiArgs?: string[];
  /** Port of the mock API; 0 picks one. A scenario that restarts the API keeps its port. */
  apiPort?: number;
  /**
   * An API the test runs itself (to watch every request as it arrives); no mock-api process is
   * started, and `api()`/`restartApi()` are not available.
   */
  apiUrl?: string;
  /** The Redis to use: a URL, or a Sentinel or Cluster topology (then `env` names it to the workers). */
  redisUrl?: string | RedisConfig;
  /** Attempts per job. Default 5 (retries are 50 ms, doubled each time). */
  attempts?: number;
  env?: Record<string, string>;
}

export interface Scenario {
  apiUrl: string;
  env: Record<string, string>;
  ids: number[];
  queue: ReturnType<typeof testQueue>['queue'];
  /** stderr of every process that ended, for the secret search. */
  logs: string[];
  startWorker(...args: string[]): CliProcess;
  /** Any command of the CLI (or another build's, `bin`) with the scenario's env and `extraEnv`, killed at cleanup, its stderr kept. */
  start(args: string[], extraEnv?: Record<string, string>, bin?: string): CliProcess;
  /** Starts the mock API again on the same port (after a kill), with other flags if given. */
  restartApi(apiArgs?: string[]): Promise<void>;
  api: () => CliProcess;
  /** Waits until nothing is waiting, delayed or active; fails at once if one of `workers` exits. */
  drained(timeoutMs?: number, workers?: CliProcess[]): Promise<void>;
  check(): Promise<{ lost: number; duplicated: number; unsynced: number; tokens: Set<string> }>;
  /**
   * The common end: waits for the queue to drain, stops `workers` with SIGTERM (each must exit
   * 0), then asserts that no job failed, no subscriber is lost or unsynced, no history row is
   * duplicated and no log holds a secret, and records the scenario's row.
   */
  finish(workers: CliProcess[], row: { scenario: string; faults: string; faultCount: number }): Promise<void>;
}

function killOnCleanup(p: CliProcess, cleanups: ScenarioOptions['cleanups']): CliProcess {
  cleanups.push(async () => {
    if (p.process.exitCode === null && p.process.signalCode === null) p.process.kill('SIGKILL');
    await p.done;
  });
  return p;
}

export async function startScenario(o: ScenarioOptions): Promise<Scenario> {
  const redisUrl = o.redisUrl ?? inject('redisUrl');
  const q = testQueue({ attempts: o.attempts ?? 5, redisUrl });
  // A scenario may take Redis away: the test's own connection just waits for it to come back.
  q.redis.on('error', () => {});
  o.cleanups.push(q.cleanup);
  const logs: string[] = [];
  let port = o.apiPort ?? 0;
  let api: CliProcess | undefined;
  const startApi = async (apiArgs = o.apiArgs ?? []) => {
    api = killOnCleanup(
      startCli(['mock-api', '--port', String(port), '--api-key', API_KEY, ...apiArgs], {}),
      o.cleanups,
    );
    const started = api;
    const url = await waitFor(
      'the mock API',
      async () => /listening on (http:\/\/\S+)/.exec(started.stdout())?.[1],
    );
    port = Number(new URL(url).port);
    return url;
  };
  const apiUrl = o.apiUrl ?? (await startApi());
  const apiProcess = () => {
    if (!api) throw new Error('this scenario runs its own API: there is no mock-api process');
    return api;
  };

  const ids = Array.from({ length: o.subscribers }, (_, i) => o.firstId + i);
  for (let i = 0; i < ids.length; i += 1000) {
    await enqueueSyncs(
      q.queue,
      ids.slice(i, i + 1000).map((subscriberId) => ({ subscriberId })),
      'manual',
    );
  }
  const env = {
    DATABASE_URL: o.db.url,
    REDIS_URL: typeof redisUrl === 'string' ? redisUrl : redisUrl.url,
    QUEUE_PREFIX: q.prefix,
    CARDS_API_BASE_URL: apiUrl,
    CARDS_API_KEY: API_KEY,
    CARD_TOKEN_KEYS,
    // A dead worker's jobs are taken over once their lock (this + 5 s) runs out.
    CARDS_API_TIMEOUT_MS: '1000',
    LOG_LEVEL: 'info',
    ...o.env,
  };
  const first = o.firstId;
  const last = o.firstId + o.subscribers - 1;

  const scenario: Scenario = {
    apiUrl,
    env,
    ids,
    queue: q.queue,
    logs,
    api: apiProcess,
    startWorker: (...args) => scenario.start(['worker', ...args]),
    start: (args, extraEnv = {}, bin = undefined) => {
      const p = killOnCleanup(startCli(args, { ...env, ...extraEnv }, bin), o.cleanups);
      void p.done.then((run) => logs.push(run.stderr));
      return p;
    },
    restartApi: async (apiArgs) => {
      logs.push((await apiProcess().done).stderr);
      await startApi(apiArgs);
    },
    drained: async (timeoutMs = 240_000, workers: CliProcess[] = []) => {
      await waitFor(
        'the queue to drain',
        async () => {
          // A worker that died while the queue still has work is the failure to report, not a timeout.
          const dead = workers.find((w) => w.process.exitCode !== null || w.process.signalCode !== null);
          if (dead)
            throw new Error(`a worker exited (${dead.process.exitCode}): ${dead.stderr().slice(-3000)}`);
          return queueIsIdle(q.queue);
        },
        timeoutMs,
      );
    },
    check: async () => {
      const pool = o.db.handle.pool;
      const rows = await pool.query<CardRow>(
        'select * from saved_cards where subscriber_id between $1 and $2 order by id',
        [first, last],
      );
      const stored = new Map<number, typeof rows.rows>();
      for (const r of rows.rows) {
        const list = stored.get(r.subscriber_id) ?? [];
        list.push(r);
        stored.set(r.subscriber_id, list);
      }
      const same = (r: (typeof rows.rows)[number], c: SavedCard) =>
        r.id === c.id &&
        // Sealed, and under the tests' key: the token the API served, never the token itself.
        r.card_token !== c.cardToken &&
        testTokens.reveal(r.id, { value: r.card_token, fingerprint: r.card_token_fingerprint }) ===
          c.cardToken &&
        r.bin_number === c.binNumber &&
        r.card_family === c.cardFamily &&
        r.card_bank_code === c.cardBankCode &&
        r.card_bank_name === c.cardBankName &&
        r.company_id === c.companyId &&
        r.create_date.getTime() === Date.parse(c.createDate) &&
        r.removed_at === null;
      let lost = 0;
      const tokens = new Set<string>();
      for (const id of ids) {
        const expected = cardsFor(id);
        for (const c of expected) tokens.add(c.cardToken);
        const got = stored.get(id) ?? [];
        if (got.length !== expected.length || !expected.every((c, k) => same(got[k]!, c))) lost++;
      }
      // History: one `added` per card and nothing else.
      const history = await pool.query<{ n: number }>(
        `select count(*)::int as n from (
           select card_id from saved_card_changes where subscriber_id between $1 and $2
           group by card_id having count(*) > 1 or bool_or(change <> 'added')) twice`,
        [first, last],
      );
      const unsynced = await pool.query<{ n: number }>(
        `select count(*)::int as n from generate_series($1::bigint, $2::bigint) s(id)
         where not exists (select 1 from sync_runs r where r.subscriber_id = s.id and r.status = 'succeeded')`,
        [first, last],
      );
      return { lost, duplicated: history.rows[0]!.n, unsynced: unsynced.rows[0]!.n, tokens };
    },
    finish: async (workers, row) => {
      await scenario.drained(240_000, workers);
      for (const w of workers) w.process.kill('SIGTERM');
      for (const w of workers) {
        const run = await w.done;
        expect(run.code, run.stderr.slice(-2000)).toBe(0);
      }
      expect(await q.queue.getJobCounts('failed')).toEqual({ failed: 0 });
      const { lost, duplicated, unsynced, tokens } = await scenario.check();
      recordFaultRow({ ...row, jobs: o.subscribers, subscribersChecked: o.subscribers, lost, duplicated });
      expect({ lost, duplicated, unsynced }).toEqual({ lost: 0, duplicated: 0, unsynced: 0 });
      expect(secretsIn(logs, { apiKey: API_KEY, cardTokens: tokens })).toEqual([]);
    },
  };
  return scenario;
}

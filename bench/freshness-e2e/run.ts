import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeRedis, createRedis } from '../../jobs/redis.js';
import { readLeaseHolder } from '../../jobs/refresh/lease-holder.js';
import { createSyncQueue, enqueueSyncs } from '../../jobs/sync/queue.js';
import { createMockApi } from '../../src/mock-api/server.js';
import { intakeIds } from '../../test/support/freshness-sim/index.js';
import { benchRedis, CLI, cliEnv, resetDatabase, seedingPool } from '../harness.js';
import { type Forecast, forecast } from './forecast.js';
import { type Running, type Setup, sampler, syncCounts } from './measure.js';
import { type Counts, type Kill, pct, type RunRecord } from './report.js';
import { inForce, type Settings } from './settings.js';

// One end-to-end run in one world (bench:freshness-e2e runs one, bench:freshness-worlds each in
// turn): two set-ups side by side, each with its own database, queue and sandbox, the same
// population and the same changes at the same moments: REFRESH_MODE=continuous, and uniform round
// robin at the same request rate (this harness enqueues every known subscriber in id order, over and
// over, for a worker in nightly mode whose cron does not fire). Every `--sample` the stored cards
// are compared with the sandbox's truth. With `--intake`, the subscribers it brings are unknown to
// both set-ups until their moment, when `cards-sync enqueue --file` adds them, as an operator does.

/** A set-up as started: what measure.ts reads, and what the intake and the kills need. */
type Started = Running & { env: NodeJS.ProcessEnv; prefix: string; spawnWorker(): ChildProcess };

/** What a run leaves for the report: the record of both set-ups, their ledgers' counts, the forecast. */
export interface RunResult {
  record: RunRecord;
  contCounts: Counts;
  rrCounts: Counts;
  sim: Forecast;
}

const KEY = 'bench-freshness-key';

/** Runs both set-ups in the world of `settings` for `settings.minutes`, then stops them. */
export async function runE2e(settings: Settings): Promise<RunResult> {
  const { subscribers: n, minutes, warmupMin, budget, sampleMs, auditShare, seed } = settings;
  const { createdDates, classes, wakeUp, wallets, intake } = settings;
  const baseUrl =
    process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench';
  const redis = benchRedis(settings.flags.redisUrl);
  const startMs = Date.now() + 30_000; // both sandboxes' wallets start changing at this moment
  // The intake's subscribers (ids from 1) and when they arrive; everyone else is known from the start.
  const newcomers = intake ? [...intakeIds(n, intake.share, seed)].map((i) => i + 1) : [];
  const pending = new Set(newcomers);
  const arrivalMs = intake ? startMs + intake.afterMs : Number.POSITIVE_INFINITY;
  const arrived = (id: number, atMs: number) => atMs >= arrivalMs || !pending.has(id);

  async function start(setup: Setup): Promise<Started> {
    // Named after BENCH_DATABASE_URL's database (cards_sync_bench_fresh_continuous by default), so
    // that two runs given different ones never drop each other's: each run drops its own first.
    const databaseUrl = baseUrl.replace(/\/([^/]+)$/, `/$1_fresh_${setup.replace('-', '_')}`);
    await resetDatabase(databaseUrl);
    const pool = seedingPool(databaseUrl, 2);
    // Every subscriber known (but an intake's) and never synced, as after an import of ids.
    await pool.query(
      'insert into subscribers (subscriber_id) select g from generate_series(1, $1::int) g where g <> all($2::int[])',
      [n, newcomers],
    );
    const mock = createMockApi({
      apiKey: KEY,
      recordRequests: false,
      latencyMs: 5,
      changes: {
        classes,
        seed,
        startMs,
        createdDates,
        ...(wakeUp ? { wakeUp } : {}),
        ...(wallets ? { wallets } : {}),
      },
    });
    await mock.start();
    const prefix = redis.tag(`fresh-${setup}-${Date.now().toString(36)}`);
    let env: NodeJS.ProcessEnv = {
      ...cliEnv({ redisEnv: redis.env, databaseUrl, apiUrl: mock.url, apiKey: KEY, prefix }),
      // Above the larger budget of a `--retune`: the refresh, not the limiter, spends it.
      SYNC_RATE_LIMIT_PER_SEC: String(
        Math.ceil(budget * Math.max(1, settings.retune?.budgetFactor ?? 1) * 1.1),
      ),
      REFRESH_MODE: setup === 'continuous' ? 'continuous' : 'nightly',
      REFRESH_BUDGET_PER_SEC: String(budget),
      REFRESH_MAX_AGE: settings.flags.maxAge,
      REFRESH_AUDIT_SHARE: String(auditShare),
      REFRESH_CRON: '0 0 1 1 *', // never within the run: the harness drives round robin itself
    };
    // Reads `env` when called: a `--retune` starts its workers with the new settings.
    const spawnWorker = () =>
      spawn(process.execPath, [CLI, 'worker'], { stdio: ['ignore', 'inherit', 'inherit'], env });
    // Under `--kill-every`, two: one holds the lease while the other waits to take it over.
    const workers = Array.from(
      { length: setup === 'continuous' && settings.killEveryMs ? 2 : 1 },
      spawnWorker,
    );
    let stopping = false;
    let driver: Promise<void> = Promise.resolve();
    const connection = createRedis(redis.target);
    const queue = createSyncQueue(connection, { prefix });
    if (setup === 'round-robin') {
      // `budget` requests a second, in id order over the known subscribers, round and round: a
      // token bucket topped up every 100 ms.
      driver = (async () => {
        let next = 1;
        let owed = 0;
        let last = Date.now();
        while (!stopping) {
          await sleep(100);
          const now = Date.now();
          owed += ((now - last) / 1000) * inForce(settings, now - startMs).budget;
          last = now;
          const count = Math.floor(owed);
          owed -= count;
          const targets = Array.from({ length: count }, () => {
            while (!arrived(next, now)) next = (next % n) + 1;
            const subscriberId = next;
            next = (next % n) + 1;
            return { subscriberId };
          });
          // With an intake, in the refresh lane, behind the operator's enqueue, as a nightly sweep's
          // jobs would be (and as the continuous refresh's are); without, as it always was.
          await enqueueSyncs(queue, targets, 'manual', intake ? { lane: 'refresh' } : {});
        }
      })();
    }
    return {
      setup,
      pool,
      mock,
      workers,
      spawnWorker,
      get env() {
        return env;
      },
      set env(next) {
        env = next;
      },
      prefix,
      samples: [],
      async stop() {
        stopping = true;
        await driver;
        await Promise.all(
          workers.map(async (worker) => {
            if (worker.exitCode !== null || worker.signalCode !== null) return;
            const exited = once(worker, 'exit');
            worker.kill('SIGTERM');
            await exited;
          }),
        );
        await queue.obliterate({ force: true }).catch(() => {});
        await queue.close();
        await closeRedis(connection);
        await mock.stop();
      },
    };
  }

  /** The intake, as an operator adds subscribers: `cards-sync enqueue --file` with their ids. */
  async function enqueueIntake(r: Started, file: string): Promise<void> {
    const child = spawn(process.execPath, [CLI, 'enqueue', '--file', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: r.env,
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    const summary = out.trim().split('\n').at(-1) ?? '';
    console.error(`intake (${r.setup}): cards-sync enqueue --file, exit ${code}: ${summary}`);
    if (code !== 0) throw new Error(`the intake's enqueue failed (${r.setup}, exit ${code}): ${out.trim()}`);
  }

  /**
   * `--retune`: the operator's rolling restart of the continuous set-up with the new budget and
   * max age: each worker replaced by one started with them, then stopped with SIGTERM (so the lease
   * passes as at a deploy). Round robin's driver spends the new budget from the same moment.
   */
  async function retune(r: Started): Promise<void> {
    const { budget: next, maxAgeMs } = inForce(settings, settings.retune!.afterMs);
    r.env = {
      ...r.env,
      REFRESH_BUDGET_PER_SEC: String(next),
      REFRESH_MAX_AGE: `${Math.round(maxAgeMs / 1000)}s`,
    };
    for (let i = 0; i < r.workers.length; i++) {
      const old = r.workers[i]!;
      r.workers[i] = r.spawnWorker();
      if (old.exitCode !== null || old.signalCode !== null) continue;
      const exited = once(old, 'exit');
      old.kill('SIGTERM');
      await exited;
    }
    console.error(
      `retune: the continuous workers restarted with REFRESH_BUDGET_PER_SEC=${next} and REFRESH_MAX_AGE=${r.env.REFRESH_MAX_AGE}`,
    );
  }

  /**
   * `--kill-every`: SIGKILL of the worker holding the continuous refresh's lease (as Postgres
   * shows it), a new worker started in its place at once, as a supervisor would; then the time until
   * another worker holds the lease.
   */
  async function killLeaseHolder(r: Started): Promise<Kill> {
    const holder = await readLeaseHolder(r.pool, null, r.prefix);
    const victim = r.workers.find(
      (w) => w.pid === holder?.pid && w.exitCode === null && w.signalCode === null,
    );
    if (holder === null || victim === undefined) {
      console.error(
        `kill: no worker of the continuous set-up holds the lease (${holder?.pid ?? 'none'}); skipped`,
      );
      return { atMs: Date.now(), takeoverMs: null };
    }
    const atMs = Date.now();
    const exited = once(victim, 'exit');
    victim.kill('SIGKILL');
    await exited;
    // Unless a `--retune` replaced it meanwhile, which started its successor already.
    const slot = r.workers.indexOf(victim);
    if (slot >= 0) r.workers[slot] = r.spawnWorker();
    for (;;) {
      const next = await readLeaseHolder(r.pool, null, r.prefix);
      if (next !== null && next.pid !== holder.pid) {
        const takeoverMs = Date.now() - atMs;
        console.error(
          `kill: SIGKILL of the lease holder (pid ${holder.pid}); pid ${next.pid} took over in ${takeoverMs} ms`,
        );
        return { atMs, takeoverMs };
      }
      if (Date.now() - atMs > 60_000) {
        console.error(
          `kill: SIGKILL of the lease holder (pid ${holder.pid}); nobody took over within a minute`,
        );
        return { atMs, takeoverMs: null };
      }
      await sleep(50);
    }
  }

  /** With `--wake-up`: the wallets that wake, and their peers (always at the woken rate), as the sandbox has them. */
  const woken = new Set<number>();
  const peers = new Set<number>();
  const measure = sampler(n, (atMs) => inForce(settings, atMs - startMs).maxAgeMs, woken, peers, arrived);

  const setups: Setup[] = ['continuous', 'round-robin'];
  console.error(
    `${settings.world ? `world ${settings.world}: ` : ''}${n} subscribers, ${budget} requests/s (a uniform sweep every ${(n / budget).toFixed(0)} s), ` +
      `max age ${settings.flags.maxAge}, ${minutes} min (figures after minute ${warmupMin}), changes ${settings.flags.changes}`,
  );
  const runs = await Promise.all(setups.map(start));
  // Stopped with Ctrl-C or SIGTERM (a `timeout`), the workers go too: left running, they would
  // reconnect to the next run's database of the same name and take its lease.
  const onSignal = (signal: NodeJS.Signals) => {
    for (const r of runs) for (const w of r.workers) w.kill('SIGKILL');
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const stopAll = async () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await Promise.all(runs.map((r) => r.stop()));
    await Promise.all(runs.map((r) => r.pool.end()));
  };
  try {
    if (wakeUp) {
      for (let id = 1; id <= n; id++) {
        if (runs[0]!.mock.wokenAt(id) !== null) woken.add(id);
        else if (Math.abs(runs[0]!.mock.changeRate(id) - wakeUp.perSecond) < 1e-12) peers.add(id);
      }
      console.error(
        `wake-up: ${woken.size} quiet wallets wake at minute ${wakeUp.afterMs / 60_000}; ${peers.size} always at that rate`,
      );
    }
    let intakeDone: Promise<void> = Promise.resolve();
    if (intake) {
      const dir = mkdtempSync(join(tmpdir(), 'cards-sync-intake-'));
      const file = join(dir, 'subscribers.txt');
      writeFileSync(file, `${newcomers.join('\n')}\n`);
      console.error(`intake: ${newcomers.length} subscribers arrive at minute ${intake.afterMs / 60_000}`);
      intakeDone = (async () => {
        await sleep(Math.max(0, arrivalMs - Date.now()));
        await Promise.all(runs.map((r) => enqueueIntake(r, file)));
      })().finally(() => rmSync(dir, { recursive: true, force: true }));
      intakeDone.catch(() => {}); // awaited after the samples, which it must not stop
    }
    const endMs = startMs + minutes * 60_000;
    const warmMs = startMs + warmupMin * 60_000;
    let retuned: Promise<void> = Promise.resolve();
    if (settings.retune) {
      const at = startMs + settings.retune.afterMs;
      retuned = (async () => {
        await sleep(Math.max(0, at - Date.now()));
        await retune(runs[0]!);
      })();
      retuned.catch(() => {}); // awaited after the samples, which it must not stop
    }
    const kills: Kill[] = [];
    let killing: Promise<void> = Promise.resolve();
    if (settings.killEveryMs) {
      const every = settings.killEveryMs;
      killing = (async () => {
        for (let at = startMs + every; at < endMs; at += every) {
          await sleep(Math.max(0, at - Date.now()));
          kills.push(await killLeaseHolder(runs[0]!));
        }
      })();
      killing.catch(() => {}); // awaited after the samples, which it must not stop
    }
    await sleep(Math.max(0, startMs - Date.now()));
    for (let at = startMs; at < endMs; at += sampleMs) {
      await sleep(Math.max(0, at - Date.now()));
      for (const r of runs) r.samples.push(await measure(r));
      const [c, rr] = runs.map((r) => r.samples.at(-1)!);
      console.error(
        `${((Date.now() - startMs) / 60_000).toFixed(1)} min: stale continuous ${pct(c!.stale / c!.population)}` +
          ` (estimate ${pct(c!.freshness?.estimatedStaleRatio ?? 0)}), round robin ${pct(rr!.stale / rr!.population)}`,
      );
    }
    await sleep(Math.max(0, endMs - Date.now()));
    await intakeDone;
    await killing;
    await retuned;

    const sim = forecast(settings);
    const cont: Running = runs[0]!;
    const rr: Running = runs[1]!;
    const contCounts = await syncCounts(cont, warmMs, endMs);
    const rrCounts = await syncCounts(rr, warmMs, endMs);
    return {
      record: { settings, startMs, warmMs, endMs, woken, peers, cont, rr, kills },
      contCounts,
      rrCounts,
      sim,
    };
  } finally {
    await stopAll();
  }
}

import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { readPolicy } from '../../db/refresh/index.js';
import { replan } from '../../jobs/refresh/policy.js';
import { loadConfig } from '../../src/config/index.js';
import { describeDisagreement, fleetDisagreements } from '../../src/fleet/index.js';
import { joinFleet, liveFleet, type ProcessInfo } from '../../src/fleet/registry.js';
import { SHARED_VARIABLES, sharedSettings } from '../../src/fleet/shared-settings.js';
import type { Logger } from '../../src/logging/index.js';
import { adminFor } from '../support/admin-helpers.js';
import { CARD_TOKEN_KEYS, testTokens, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// The fleet registry: every long-running process registers with a heartbeat,
// shows in status, status --json, the overview and /metrics, drops out when it stops beating and
// leaves at once when it stops cleanly.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
const pool = () => database.handle.pool;
const envFor = (q: { prefix: string }, extra: Record<string, string> = {}) =>
  workerEnv(
    { databaseUrl: database.url, redisUrl: inject('redisUrl'), prefix: q.prefix, apiUrl: upstream.url },
    extra,
  );

const journal = JSON.parse(
  readFileSync(new URL('../../db/migrations/meta/_journal.json', import.meta.url), 'utf8'),
) as { entries: { tag: string }[] };
const newestMigration = journal.entries.at(-1)!.tag;
const version = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

function info(settings: Record<string, unknown> = {}): ProcessInfo {
  return {
    role: 'worker',
    version: '0.0.9-test',
    knownMigration: '0009_test',
    keyIds: ['k1'],
    concurrency: 4,
    settings: { SYNC_RATE_LIMIT_PER_SEC: 100, ...settings },
  };
}

describe('the fleet registry', () => {
  it('a worker registers at start with what it is, shows in status, status --json and /metrics, and leaves at once on SIGTERM', async () => {
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = envFor(q, { SYNC_RATE_LIMIT_PER_SEC: '40' });
    const worker = startCli(['worker', '--concurrency', '3'], env);
    cleanups.push(async () => {
      if (worker.process.exitCode === null) worker.process.kill('SIGKILL');
      await worker.done;
    });
    await waitFor('the worker in the fleet', async () => (await liveFleet(pool())).length === 1, 20_000);
    const json = JSON.parse((await runCli(['status', '--json'], env)).stdout) as {
      fleet: Record<string, unknown>[];
    };
    expect(json.fleet).toHaveLength(1);
    const [me] = json.fleet;
    // The worker replaced itself with a Node of its heap sizes (bin/cards-sync.js), in the same
    // process: the pid the fleet has is the one started.
    const cmdline = readFileSync(`/proc/${worker.process.pid}/cmdline`, 'utf8').split('\0');
    expect(cmdline).toEqual(expect.arrayContaining(['--max-semi-space-size=16', '--max-old-space-size=128']));
    expect(me).toMatchObject({
      role: 'worker',
      pid: worker.process.pid,
      version,
      knownMigration: newestMigration,
      keyIds: [CARD_TOKEN_KEYS.split(':')[0]],
      concurrency: 3,
      settings: {
        SYNC_RATE_LIMIT_PER_SEC: 40,
        REFRESH_MODE: 'nightly',
        REFRESH_MAX_AGE: '7d',
        QUEUE_PREFIX: q.prefix,
        REDIS_CLUSTER_NODES: 'unset',
      },
    });
    expect(Object.keys(me!).sort()).toEqual(
      [
        'concurrency',
        'host',
        'id',
        'keyIds',
        'knownMigration',
        'lastBeatAt',
        'pid',
        'role',
        'settings',
        'startedAt',
        'version',
      ].sort(),
    );
    // Every shared variable is published, under its own name.
    expect(Object.keys(me!.settings as object).sort()).toEqual([...SHARED_VARIABLES].sort());
    // No key material anywhere: ids only.
    expect(JSON.stringify(json.fleet)).not.toContain(CARD_TOKEN_KEYS.split(':')[1]);
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toContain('fleet: 1 live process');
    expect(text).toMatch(
      new RegExp(`worker \\S+: ${version.replace(/\./g, '\\.')}, migration ${newestMigration}`),
    );

    const get = adminFor(database, q, cleanups);
    const scrape = await get('/metrics');
    expect(scrape).toContain(`cards_sync_fleet_processes{version="${version}",role="worker"} 1`);
    const overview = await get('/admin');
    expect(overview).toContain('<table id="fleet">');
    expect(overview).toContain(newestMigration);

    worker.process.kill('SIGTERM');
    expect((await worker.done).code).toBe(0);
    expect(await liveFleet(pool())).toEqual([]);
    const after = await get('/metrics');
    expect(after).not.toContain('cards_sync_fleet_processes{');
  });

  it('a process that stops beating drops out after 15 s; one gone a day is forgotten by the next to join', async () => {
    const a = await joinFleet(pool(), info(), { beatMs: 50 });
    cleanups.push(() => a.leave());
    await pool().query(
      `insert into fleet_processes (id, role, host, pid, version, known_migration, started_at, last_beat_at)
        values ('silent', 'worker', 'h', 1, '0.0.1', '0001', now() - interval '1 hour', now() - interval '16 seconds'),
               ('between-beats', 'worker', 'h', 3, '0.0.1', '0001', now() - interval '1 hour', now() - interval '9 seconds'),
               ('ancient', 'worker', 'h', 2, '0.0.1', '0001', now() - interval '3 days', now() - interval '2 days')`,
    );
    // Silent for 16 s (a SIGKILLed worker): gone. 9 s since its last beat: two beats late, still there.
    expect((await liveFleet(pool())).map((p) => p.id).sort()).toEqual([a.id, 'between-beats'].sort());
    await pool().query(`delete from fleet_processes where id = 'between-beats'`);
    const live = await liveFleet(pool());
    expect(live.map((p) => p.id)).toEqual([a.id]);
    // Its beats move last_beat_at on.
    const first = live[0]!.lastBeatAt;
    await waitFor('a beat', async () => (await liveFleet(pool()))[0]!.lastBeatAt !== first, 5000);
    const b = await joinFleet(pool(), info(), { beatMs: 60_000 });
    cleanups.push(() => b.leave());
    const { rows } = await pool().query<{ id: string }>('select id from fleet_processes order by id');
    expect(rows.map((r) => r.id).sort()).toEqual([a.id, b.id, 'silent'].sort());
    // A row deleted behind its back (forgotten after an outage) is written again at the next beat.
    await pool().query('delete from fleet_processes where id = $1', [a.id]);
    await waitFor(
      'the row written again',
      async () => (await liveFleet(pool())).some((p) => p.id === a.id),
      5000,
    );
    await a.leave();
    await b.leave();
    expect((await liveFleet(pool())).map((p) => p.id)).toEqual([]);
  });

  it('status and the overview say which shared settings the live processes disagree on', async () => {
    const a = await joinFleet(pool(), info({ SYNC_RATE_LIMIT_PER_SEC: 100 }));
    const b = await joinFleet(pool(), info({ SYNC_RATE_LIMIT_PER_SEC: 0 }));
    cleanups.push(() => a.leave());
    cleanups.push(() => b.leave());
    const env = { DATABASE_URL: database.url, REDIS_URL: inject('redisUrl') };
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toContain('fleet: 2 live processes');
    expect(text).toContain(
      'SETTINGS DIFFER: SYNC_RATE_LIMIT_PER_SEC is 100 (1) vs 0 (1): every process must share it',
    );
    expect(text).not.toMatch(/SETTINGS DIFFER: (QUEUE_PREFIX|REFRESH_MODE)/);
  });

  it('keys: a worker whose first key a live worker lacks refuses to start, tokens rotate refuses, doctor warns', async () => {
    const ownKey = CARD_TOKEN_KEYS.split(':')[0]!;
    const other = await joinFleet(pool(), { ...info(), keyIds: ['someone-else'] });
    cleanups.push(() => other.leave());
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = envFor(q);
    const refused = await runCli(['worker', '--exit-when-idle'], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim()).toBe(
      `cards-sync: CARD_TOKEN_KEYS's first key ${ownKey} is not in the ring of 1 live worker: ` +
        `worker ${other.id} (0.0.9-test, keys someone-else). Give every worker a ring that holds ${ownKey} (second), then make it first`,
    );
    const rotate = await runCli(['tokens', 'rotate'], env);
    expect(rotate.code).toBe(1);
    expect(rotate.stderr).toContain(
      `tokens rotate would seal under key ${ownKey}, which 1 live worker does not hold: worker ${other.id}`,
    );
    const before = await pool().query(
      `select count(*)::int as n from admin_actions where action = 'tokens_rotate'`,
    );
    expect(before.rows[0].n).toBe(0);
    const doctor = await runCli(['doctor'], env);
    expect(doctor.stdout).toMatch(
      new RegExp(
        `^WARN {2}fleet {14}1 live \\(0\\.0\\.9-test\\); key rings disagree: ${other.id} lacks ${ownKey}$`,
        'm',
      ),
    );
    // Once the other worker holds the key too, the worker starts and doctor is content.
    await other.leave();
    const holder = await joinFleet(pool(), { ...info(), keyIds: ['someone-else', ownKey] });
    cleanups.push(() => holder.leave());
    const started = await runCli(['worker', '--exit-when-idle'], env);
    expect(started.code).toBe(0);
    // And the rotation that was refused goes through.
    const rotated = await runCli(['tokens', 'rotate'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const doctor2 = await runCli(['doctor'], env);
    expect(doctor2.stdout).toMatch(/^ok {4}fleet {14}1 live \(0\.0\.9-test\); key rings agree/m);
  });

  it('a worker whose shared settings differ from the fleet warns in its log, and /metrics counts the disagreements', async () => {
    const a = await joinFleet(pool(), {
      ...info({ SYNC_RATE_LIMIT_PER_SEC: 100 }),
      keyIds: [CARD_TOKEN_KEYS.split(':')[0]!],
    });
    cleanups.push(() => a.leave());
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = envFor(q, { LOG_LEVEL: 'warn' });
    const run = await runCli(['worker', '--exit-when-idle'], env);
    expect(run.code).toBe(0);
    expect(run.stdout + run.stderr).toContain(
      'SYNC_RATE_LIMIT_PER_SEC is 0 here, 100 on 1 live process: every process must share it',
    );
    const b = await joinFleet(pool(), info({ SYNC_RATE_LIMIT_PER_SEC: 0 }));
    cleanups.push(() => b.leave());
    const scrape = await adminFor(database, q, cleanups)('/metrics');
    expect(scrape).toMatch(/^cards_sync_fleet_settings_differ 1$/m);
    expect(scrape).toContain('cards_sync_fleet_processes{version="0.0.9-test",role="worker"} 2');
  });

  it('a worker whose ring lacks the key that sealed stored tokens says so at start', async () => {
    const sealed = testTokens.store(990101, 'tok-fleet-1');
    await pool().query(
      `insert into saved_cards (id, subscriber_id, card_token, card_token_fingerprint, bin_number, card_family,
         card_bank_code, card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
       values (990101, 991, $1, $2, '4761-xxxx-xxxx-0043', '', 1, 'AKBA', 1, now(), now(), now(), now())`,
      [sealed.value, sealed.fingerprint],
    );
    cleanups.push(() => pool().query('delete from saved_cards where id = 990101'));
    const q = testQueue();
    cleanups.push(q.cleanup);
    const other = `test2:${Buffer.alloc(32, 9).toString('base64')}`;
    const run = await runCli(
      ['worker', '--exit-when-idle'],
      envFor(q, { CARD_TOKEN_KEYS: other, LOG_LEVEL: 'warn' }),
    );
    expect(run.code).toBe(0);
    const own = CARD_TOKEN_KEYS.split(':')[0];
    expect(run.stdout + run.stderr).toContain(
      `stored card tokens are sealed under key ${own}, which CARD_TOKEN_KEYS lacks: syncs of those cards fail with token_key_unknown`,
    );
    expect(run.stdout + run.stderr).not.toContain(Buffer.alloc(32, 9).toString('base64'));
  });

  it('two workers with different REFRESH_MAX_AGE: the second warns naming the variable and both values; status and doctor say SETTINGS DIFFER', async () => {
    const q = testQueue();
    cleanups.push(q.cleanup);
    const start = (extra: Record<string, string>) => {
      const worker = startCli(['worker'], envFor(q, extra));
      cleanups.push(async () => {
        if (worker.process.exitCode === null) worker.process.kill('SIGKILL');
        await worker.done;
      });
      return worker;
    };
    const first = start({ REFRESH_MAX_AGE: '2m' });
    await waitFor(
      'the first worker in the fleet',
      async () => (await liveFleet(pool())).length === 1,
      20_000,
    );
    const second = start({ REFRESH_MAX_AGE: '1s', LOG_LEVEL: 'warn' });
    await waitFor(
      'the second worker in the fleet',
      async () => (await liveFleet(pool())).length === 2,
      20_000,
    );
    expect(second.stdout() + second.stderr()).toContain(
      'REFRESH_MAX_AGE is 1s here, 2m on 1 live process: every process must share it',
    );
    const env = envFor(q);
    const status = (await runCli(['status'], env)).stdout;
    expect(status).toContain(
      'SETTINGS DIFFER: REFRESH_MAX_AGE is 2m (1) vs 1s (1): every process must share it',
    );
    // Only what differs: the two agree on everything else.
    expect(status.match(/SETTINGS DIFFER/g)).toHaveLength(1);
    const doctor = await runCli(['doctor'], env);
    expect(doctor.stdout).toMatch(
      /^WARN {2}fleet {14}2 live \(\S+\); key rings agree; settings differ: REFRESH_MAX_AGE is 2m \(1\) vs 1s \(1\) \(see cards-sync status\)$/m,
    );
    first.process.kill('SIGTERM');
    second.process.kill('SIGTERM');
    expect((await first.done).code).toBe(0);
    expect((await second.done).code).toBe(0);
  });

  it('a process of an older release (settings under their old names, fewer of them) agrees where it agrees', async () => {
    const mine = sharedSettings(loadConfig({ SYNC_RATE_LIMIT_PER_SEC: '100', QUEUE_PREFIX: 'q1' }));
    const old = await joinFleet(pool(), {
      ...info(),
      settings: {
        rateLimitPerSec: 100,
        refreshMode: 'nightly',
        refreshBudgetPerSec: null,
        queuePrefix: 'q1',
        redisTopology: 'single',
      },
    });
    const now = await joinFleet(pool(), { ...info(), settings: mine });
    cleanups.push(() => old.leave());
    cleanups.push(() => now.leave());
    const fleet = await liveFleet(pool());
    expect(fleet.find((p) => p.id === old.id)?.settings).toEqual({
      SYNC_RATE_LIMIT_PER_SEC: 100,
      REFRESH_MODE: 'nightly',
      REFRESH_BUDGET_PER_SEC: null,
      QUEUE_PREFIX: 'q1',
      REDIS_SENTINELS: 'unset',
      REDIS_CLUSTER_NODES: 'unset',
    });
    expect(fleetDisagreements(fleet)).toEqual([]);
    // What it does publish is still compared.
    const other = await joinFleet(pool(), { ...info(), settings: { rateLimitPerSec: 5 } });
    cleanups.push(() => other.leave());
    expect(fleetDisagreements(await liveFleet(pool())).map(describeDisagreement)).toEqual([
      'SYNC_RATE_LIMIT_PER_SEC is 100 (2) vs 5 (1)',
    ]);
  });

  it("the refresh's plan judges the max age by the smallest REFRESH_MAX_AGE among the live workers", async () => {
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at) select g, now() from generate_series(880001, 880010) g`,
    );
    cleanups.push(() =>
      pool().query('delete from subscribers where subscriber_id between 880001 and 880010'),
    );
    const warnings: string[] = [];
    const logger = { warn: (_: unknown, message: string) => warnings.push(message) } as unknown as Logger;
    // 10 subscribers once per 2 minutes need 0.08 syncs/s: a budget of 1/s keeps it.
    const settings = { mode: 'continuous' as const, budgetPerSec: 1, maxAgeMs: 120_000, auditShare: 0 };
    expect((await replan(pool(), settings, logger)).keepsMaxAge).toBe(true);
    expect(warnings).toEqual([]);
    // A worker at 1s reschedules what it syncs within 1 s: 10/s, which the budget cannot keep.
    const strict = await joinFleet(pool(), info({ REFRESH_MAX_AGE: '1s' }));
    cleanups.push(() => strict.leave());
    const plan = await replan(pool(), settings, logger);
    expect(plan.keepsMaxAge).toBe(false);
    expect(plan.maxAgeSeconds).toBe(120);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^the refresh budget cannot keep REFRESH_MAX_AGE: \d+ subscribers once per 1s need \d+\.\d\d syncs\/s, the budget for the schedule is 1\.00\/s\. /,
    );
    expect(warnings[0]).toContain(
      `(REFRESH_MAX_AGE 1s is live worker ${strict.id}'s, the smallest in the fleet)`,
    );
    expect((await readPolicy(pool()))?.keepsMaxAge).toBe(false);
    await strict.leave();
    expect((await replan(pool(), settings, logger)).keepsMaxAge).toBe(true);
  });
});

import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { liveFleet } from '../../src/fleet/registry.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, startCli, waitFor } from '../support/queue-helpers.js';
import { startScenario } from './scenario.js';

// A rolling upgrade with the fleet running: two builds side by side. The next build is
// today's code plus a test-only breaking migration and a payload version bump, built into a folder
// of its own. Old workers sync under load with a refresh in flight; the next build's `migrate
// --wait` waits for them; new workers start; the old ones leave; the migration applies. Nothing is
// lost, duplicated or retried, and every stored wallet is what the API serves.

const database = useTestDatabase();
const cleanups = useCleanups();
const root = fileURLToPath(new URL('../../', import.meta.url));

/** The next release: dist, bin and migrations copied, one breaking migration more, payloads at v2. */
function nextBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-next-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  for (const part of ['dist', 'bin', 'db']) cpSync(join(root, part), join(dir, part), { recursive: true });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ ...pkg, version: '9.9.9-next' }));
  const bump = (file: string, from: string, to: string) => {
    const text = readFileSync(join(dir, file), 'utf8');
    if (!text.includes(from)) throw new Error(`${file} has no ${from}`);
    writeFileSync(join(dir, file), text.replace(from, to));
  };
  bump('dist/jobs/sync/queue.js', 'SYNC_PAYLOAD_VERSION = 1', 'SYNC_PAYLOAD_VERSION = 2');
  bump('dist/jobs/refresh/queue.js', 'REFRESH_PAYLOAD_VERSION = 1', 'REFRESH_PAYLOAD_VERSION = 2');
  const migrations = join(dir, 'db', 'migrations');
  const journalPath = join(migrations, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as {
    entries: { idx: number; when: number; tag: string }[];
  };
  const last = journal.entries.at(-1)!;
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag: '0099_next_breaking' });
  writeFileSync(journalPath, JSON.stringify(journal));
  writeFileSync(
    join(migrations, '0099_next_breaking.sql'),
    'CREATE TABLE "next_release_marker" ("id" integer);',
  );
  const record = JSON.parse(readFileSync(join(migrations, 'breaking.json'), 'utf8')) as {
    breaking: Record<string, string>;
  };
  record.breaking['0099_next_breaking'] = 'test only';
  writeFileSync(join(migrations, 'breaking.json'), JSON.stringify(record));
  return dir;
}

it('rolling upgrade: migrate --wait, new workers in, old ones out: 0 lost, 0 duplicated, no attempt wasted', async () => {
  const next = nextBuild();
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: 6000,
    firstId: 7_000_000,
    apiArgs: ['--latency-ms', '3'],
    env: { SYNC_RATE_LIMIT_PER_SEC: '600' },
  });
  const nextCli = (args: string[]): CliProcess => s.start(args, {}, join(next, 'bin', 'cards-sync.js'));
  const pool = database.handle.pool;
  const synced = async () =>
    (
      await pool.query<{ n: number }>(
        `select count(*)::int as n from subscribers where last_success_at is not null`,
      )
    ).rows[0]!.n;

  const old = [s.startWorker('--concurrency', '8'), s.startWorker('--concurrency', '8')];
  await waitFor('the old workers under way', async () => (await synced()) >= 1000, 60_000);
  // A refresh in flight over the subscribers known so far.
  const refresh = startCli(['refresh'], s.env);
  expect((await refresh.done).code).toBe(0);

  const migrate = nextCli(['migrate', '--wait', '120s']);
  await waitFor('migrate waiting', async () => /waiting for 2 live processes/.test(migrate.stderr()), 20_000);
  const fresh = [nextCli(['worker', '--concurrency', '8']), nextCli(['worker', '--concurrency', '8'])];
  await waitFor(
    'the new workers in the fleet',
    async () => (await liveFleet(pool)).filter((p) => p.version === '9.9.9-next').length === 2,
    30_000,
  );
  expect(migrate.process.exitCode).toBeNull();
  await sleep(1000);
  for (const w of old) w.process.kill('SIGTERM');
  for (const w of old) expect((await w.done).code).toBe(0);
  const migrated = await migrate.done;
  expect(migrated.code, migrated.stderr).toBe(0);
  expect(migrated.stdout).toContain('applied 1 migration');
  const marker = await pool.query(`select to_regclass('public.next_release_marker') as t`);
  expect(marker.rows[0].t).not.toBeNull();
  // The fleet is the next release alone.
  expect(new Set((await liveFleet(pool)).map((p) => p.version))).toEqual(new Set(['9.9.9-next']));
  // An old worker started now refuses: the database has a breaking migration it does not know.
  const late = s.startWorker('--exit-when-idle');
  const lateRun = await late.done;
  expect(lateRun.code).toBe(3);
  expect(lateRun.stderr).toContain('but the database has breaking migration 0099_next_breaking');

  await s.drained(240_000, fresh);
  // No attempt wasted: every sync run succeeded, once per job.
  const runs = await pool.query<{ status: string; n: number }>(
    `select status, count(*)::int as n from sync_runs group by 1 order by 1`,
  );
  expect(runs.rows.filter((r) => r.status !== 'succeeded' && r.status !== 'superseded')).toEqual([]);
  await s.finish(fresh, {
    scenario: 'rolling upgrade',
    faults:
      'old workers replaced by a next release with a breaking migration (migrate --wait) and v2 payloads',
    faultCount: 1,
  });
}, 300_000);

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { closeRedis, createRedis } from '../jobs/redis.js';
import { createMockApi } from '../src/mock-api/server.js';
import { benchRedis, CLI, cliEnv, databaseFlag, parseFlags, REDIS_FLAG, wholeNumber } from './harness.js';
import {
  holdWal,
  markBefore,
  rowsPerSync,
  settle,
  type TableCounts,
  tableCounts,
  walByRelation,
  walBytes,
  walPosition,
  walSplit,
} from './wal.js';

// npm run bench:wal-cli [-- --subscribers 3000 --repeats 3 --resyncs 2 --continuous-seconds 60 --budget 50
//   --cli PATH/bin/cards-sync.js --prototype-sql FILE]
//
// WAL bytes per subscriber as an OPERATOR pays them: nothing here writes to Postgres itself: every
// write comes from `node bin/cards-sync.js …` processes, started as the operator starts them, in
// the order the outside measurement ran them:
//   first sync:        cards-sync enqueue --file ids.txt; cards-sync worker --exit-when-idle
//   unchanged re-sync: cards-sync refresh;                cards-sync worker --exit-when-idle
// every answer of the sandbox the same both times (no --changes, one generation). bench:run
// measures a pipeline in-process, from enqueueSyncs; the operator's path adds what those commands
// write around the syncs (the refresh run's fan-out and its reads of `subscriber_schedule`, the
// worker's process rows, audits), which is where the outside figure and bench:run part ways.
//
// A phase is measured whole, from one checkpoint (bench/wal.ts says why the checkpoint), so its FPI
// share is what the operator's one would be with a checkpoint just passed. Between its two commands
// the WAL position and the table counters are read but no checkpoint is taken: one there would make
// the worker pay a second image of the pages `enqueue` or `refresh` had just touched, which no
// operator's run does. So the split by command is exact in bytes, and the phase is the sum.
//
// Then, if asked (`--continuous-seconds`, 0 skips it), the continuous mode on the same synced
// population: one `cards-sync worker` with REFRESH_MODE=continuous and a budget, for a fixed time,
// stopped with SIGTERM as a deploy stops it; WAL per sync (sync_runs rows inserted), since there
// the number of syncs, not of subscribers, is what the time bought.
//
// Each repeat starts from a dropped database (migrated by `cards-sync migrate`, as an operator
// creates it) and a Redis prefix of its own. The server is shared: another engineer's tests may
// write during a phase. The pg_walinspect split says how much of each range was not this database
// ("other"), which is the first thing to read when repeats disagree.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '3000' },
    repeats: { type: 'string', default: '3' },
    /** Nightly re-syncs (refresh, then worker) after the first sync, each a phase. */
    resyncs: { type: 'string', default: '2' },
    /**
     * The CLI to drive, `bin/cards-sync.js` of this checkout by default: another build's (a
     * prototype copied aside, a release) is measured by the same phases.
     */
    cli: { type: 'string', default: CLI },
    /** How long the continuous worker runs; 0: no continuous phase. */
    'continuous-seconds': { type: 'string', default: '60' },
    /** The continuous refresh's REFRESH_BUDGET_PER_SEC. */
    budget: { type: 'string', default: '50' },
    /** The continuous refresh's REFRESH_MAX_AGE; unset, the operator's default (7 days). */
    'max-age': { type: 'string' },
    /** A continuous run before the measured one, measured apart: see the continuous phase. */
    'warmup-seconds': { type: 'string', default: '15' },
    /**
     * A file of SQL run on the bench database after the migrations, before the first phase: a
     * prototype of a schema change (a fillfactor, a dropped trigger) measured without touching the
     * release's migrations. Never run against anything but the bench's own database.
     */
    'prototype-sql': { type: 'string' },
    ...databaseFlag('cards_sync_walcli'),
    ...REDIS_FLAG,
  },
});
const n = wholeNumber('subscribers', values.subscribers, 10);
const repeats = wholeNumber('repeats', values.repeats, 1);
const continuousSeconds = wholeNumber('continuous-seconds', values['continuous-seconds'], 0);
const budget = wholeNumber('budget', values.budget, 1);
const resyncs = wholeNumber('resyncs', values.resyncs, 1);
const cliPath = values.cli!;
const warmupSeconds = wholeNumber('warmup-seconds', values['warmup-seconds'], 0);
const databaseUrl = values['database-url']!;
const redis = benchRedis(values['redis-url']);
const KEY = 'bench-wal-cli-key';

/** One command's share of a phase. */
interface Step {
  command: string;
  bytes: number;
  exit: number | null;
  /** Totals of the step (not per subscriber): the figures pg_stat_user_tables gives an operator. */
  tables: Record<string, { ins: number; upd: number; hot: number; del: number }>;
  /** The step's own WAL by relation (pg_walinspect), null without it. */
  byRelation: { what: string; bytes: number; fpiBytes: number }[] | null;
}

/** WAL of a phase by relation, record type and whether its transaction wrote a sync's ledger row. */
interface RecordRow {
  what: string;
  record: string;
  /** The record's transaction inserted into sync_runs: a sync's batch write (triggers included). */
  inSync: boolean;
  count: number;
  bytes: number;
  fpiBytes: number;
}

/** One phase (two commands under one checkpoint), or the continuous run. */
interface Phase {
  name: string;
  /** What the bytes are divided by: subscribers for a nightly phase, syncs for continuous. */
  per: number;
  perWhat: 'subscriber' | 'sync';
  bytes: number;
  steps: Step[];
  split: { benchDbBytes: number; benchDbFpiBytes: number; otherBytes: number } | null;
  byRelation: { what: string; bytes: number; fpiBytes: number }[] | null;
  byRecord: RecordRow[] | null;
}

const adminUrl = databaseUrl.replace(/\/[^/]+$/, '/postgres');

async function dropDatabase(): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`drop database if exists "${new URL(databaseUrl).pathname.slice(1)}" with (force)`);
  } finally {
    await c.end();
  }
}

/** Runs `cards-sync …` to its end; its output is kept and shown only if it fails. */
async function cli(env: NodeJS.ProcessEnv, args: string[]): Promise<number | null> {
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) console.error(`  cards-sync ${args.join(' ')}: exit ${code}\n${out.trim()}`);
  return code;
}

/** `cards-sync worker` for `seconds`, then SIGTERM, as a rolling deploy stops it. */
async function cliFor(env: NodeJS.ProcessEnv, args: string[], seconds: number): Promise<number | null> {
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'ignore', 'inherit'], env });
  const exited = once(child, 'exit');
  await Promise.race([sleep(seconds * 1000), exited]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  return code;
}

/**
 * Which statements a relation's bytes come from, as far as the WAL can tell: the record type
 * (an UPDATE that had to make a new version with index entries, a HOT_UPDATE, a PRUNE a reader
 * left behind, a btree INSERT_LEAF…) and whether the record's transaction also inserted a ledger
 * row (sync_runs): a sync's one batch statement and the triggers it fires, against the fan-out's,
 * the claims' and the intake's own transactions. bench/wal.ts `walByRelation` says what a sync
 * costs; this says which code path to change.
 */
async function walByRecord(from: string, to: string): Promise<RecordRow[] | null> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{
      what: string;
      record: string;
      in_sync: boolean;
      n: string;
      bytes: string;
      fpi: string;
    }>(
      `with w as (
         select xid, resource_manager || ' ' || record_type as record, record_length, fpi_length,
                (regexp_match(block_ref, 'rel \\d+/(\\d+)/\\d+'))[1] as db,
                (regexp_match(block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid as filenode
         from pg_get_wal_records_info($1, least($2::pg_lsn, pg_current_wal_flush_lsn()))),
       here as (select oid::text as db from pg_database where datname = current_database()),
       named as (
         select w.*, pg_filenode_relation(0, w.filenode)::regclass::text as rel
         from w where w.db = (select db from here)),
       syncs as (select distinct xid from named where rel ~ '^sync_runs(_p\\d+)?$' and record like 'Heap INSERT%')
       select coalesce(rel, '?') as what, record, xid in (select xid from syncs) as in_sync,
              count(*) as n, sum(record_length) as bytes, sum(fpi_length) as fpi
       from named group by 1, 2, 3 order by 5 desc`,
      [from, to],
    );
    return rows.map((r) => ({
      what: r.what,
      record: r.record,
      inSync: r.in_sync,
      count: Number(r.n),
      bytes: Number(r.bytes),
      fpiBytes: Number(r.fpi),
    }));
  } catch (error) {
    console.error(`  (WAL not split by record: ${(error as Error).message})`);
    return null;
  } finally {
    await c.end();
  }
}

/**
 * A phase: checkpoint, then each command in turn, the WAL position and the counters read after
 * each (once the command's backends are gone, so its counters are flushed). `per` may be computed
 * from the counters (the continuous run counts its syncs).
 */
async function phase(
  name: string,
  perWhat: Phase['perWhat'],
  commands: { label: string; run: () => Promise<number | null> }[],
  per: (before: Record<string, TableCounts>, after: Record<string, TableCounts>) => number,
): Promise<Phase> {
  await settle(databaseUrl);
  const release = await holdWal(databaseUrl);
  try {
    const start = await markBefore(databaseUrl);
    let lsn = start.lsn;
    let counts = start.tables;
    const steps: Step[] = [];
    for (const c of commands) {
      const exit = await c.run();
      if (!(await settle(databaseUrl)))
        console.error(`  (${c.label}: backends of the bench database linger)`);
      const after = await tableCounts(databaseUrl);
      const end = await walPosition(databaseUrl);
      steps.push({
        command: c.label,
        bytes: await walBytes(databaseUrl, lsn, end),
        exit,
        tables: rowsPerSync(counts, after, 1),
        byRelation: start.walinspect ? await walByRelation(databaseUrl, lsn, end) : null,
      });
      lsn = end;
      counts = after;
    }
    const bytes = await walBytes(databaseUrl, start.lsn, lsn);
    return {
      name,
      per: per(start.tables, counts),
      perWhat,
      bytes,
      steps,
      split: start.walinspect ? await walSplit(databaseUrl, start.lsn, lsn) : null,
      byRelation: start.walinspect ? await walByRelation(databaseUrl, start.lsn, lsn) : null,
      byRecord: start.walinspect ? await walByRecord(start.lsn, lsn) : null,
    };
  } finally {
    await release();
  }
}

/** Deletes a repeat's Redis keys: its prefix is its own, so nothing else matches. */
async function dropPrefix(prefix: string): Promise<void> {
  const connection = createRedis(redis.target);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await connection.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await connection.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    await closeRedis(connection);
  }
}

async function repeat(index: number): Promise<Phase[]> {
  await dropDatabase();
  // Answers never change: no --changes, one generation, no faults. 1 to 4 cards a subscriber, as
  // `cards-sync mock-api` gives by default.
  const mock = createMockApi({ apiKey: KEY, recordRequests: false });
  await mock.start();
  const prefix = redis.tag(`walcli-${process.pid}-${index}`);
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-walcli-'));
  const ids = join(dir, 'ids.txt');
  writeFileSync(ids, `${Array.from({ length: n }, (_, i) => i + 1).join('\n')}\n`);
  // The operator's settings, but for the nightly cron, which must not fire while a phase runs
  // (02:00 by default): the refresh is the one the operator starts by hand.
  const env: NodeJS.ProcessEnv = {
    ...cliEnv({ redisEnv: redis.env, databaseUrl, apiUrl: mock.url, apiKey: KEY, prefix }),
    REFRESH_CRON: '0 0 1 1 *',
  };
  const phases: Phase[] = [];
  try {
    if ((await cli(env, ['migrate'])) !== 0) throw new Error('cards-sync migrate failed');
    if (values['prototype-sql'] !== undefined) {
      const c = new pg.Client({ connectionString: databaseUrl });
      await c.connect();
      try {
        await c.query(readFileSync(values['prototype-sql'], 'utf8'));
      } finally {
        await c.end();
      }
      console.log(`(prototype: ${values['prototype-sql']} applied after the migrations)`);
    }
    const bySubscribers = () => n;
    phases.push(
      await phase(
        'first sync',
        'subscriber',
        [
          { label: 'enqueue --file ids.txt', run: () => cli(env, ['enqueue', '--file', ids]) },
          { label: 'worker --exit-when-idle', run: () => cli(env, ['worker', '--exit-when-idle']) },
        ],
        bySubscribers,
      ),
    );
    // The outside measurement's re-sync is the first one; later ones are the nightly steady state.
    // They differ: the first sync planned under no refresh plan and over the enqueue's lease, the
    // first refresh makes a plan (jobs/refresh/policy.ts), so the first re-sync moves the schedule
    // twice (a catch-up, then a sooner plan) where a later one moves it at most once.
    for (let k = 1; k <= resyncs; k++) {
      phases.push(
        await phase(
          k === 1 ? 'unchanged re-sync' : `unchanged re-sync ${k}`,
          'subscriber',
          [
            { label: 'refresh', run: () => cli(env, ['refresh']) },
            { label: 'worker --exit-when-idle', run: () => cli(env, ['worker', '--exit-when-idle']) },
          ],
          bySubscribers,
        ),
      );
    }
    if (continuousSeconds > 0) {
      // The same population, synced twice, answers unchanged. The rate limit above the budget, as
      // the configuration requires; the budget is what the refresh spends.
      const cenv: NodeJS.ProcessEnv = {
        ...env,
        REFRESH_MODE: 'continuous',
        REFRESH_BUDGET_PER_SEC: String(budget),
        SYNC_RATE_LIMIT_PER_SEC: String(Math.ceil(budget * 1.1)),
        ...(values['max-age'] !== undefined ? { REFRESH_MAX_AGE: values['max-age'] } : {}),
      };
      // The first continuous window after the nightly sweep makes its plan and may move every due
      // time at once (a max age shorter than the plans the sweep left: db/refresh/schedule-cap.ts,
      // one update of subscribers and of subscriber_schedule per subscriber). That is a one-off of
      // switching modes, not what a sync costs, so a warm-up run takes it and is shown apart.
      const runs = warmupSeconds > 0 ? [['continuous warm-up', warmupSeconds] as const] : [];
      for (const [name, seconds] of [...runs, ['continuous', continuousSeconds] as const]) {
        phases.push(
          await phase(
            `${name} ${seconds}s @${budget}/s`,
            'sync',
            [{ label: `worker (${seconds}s, SIGTERM)`, run: () => cliFor(cenv, ['worker'], seconds) }],
            syncsBetween,
          ),
        );
      }
    }
  } finally {
    await mock.stop();
    rmSync(dir, { recursive: true, force: true });
    await dropPrefix(prefix);
  }
  return phases;
}

/**
 * Syncs between two readings: every sync, whatever its outcome, writes one ledger row, in the
 * day's partition of sync_runs (sync_runs_pYYYYMMDD); a run over midnight writes to two.
 */
function syncsBetween(before: Record<string, TableCounts>, after: Record<string, TableCounts>): number {
  let syncs = 0;
  for (const [table, a] of Object.entries(after)) {
    if (/^sync_runs(_p\d+)?$/.test(table)) syncs += a.ins - (before[table]?.ins ?? 0);
  }
  return syncs;
}

const fmt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-');

function print(r: number, p: Phase): void {
  const per = p.per > 0 ? p.bytes / p.per : Number.NaN;
  console.log(
    `\n[repeat ${r}] ${p.name}: ${fmt(p.bytes)} B WAL, ${fmt(per)} B per ${p.perWhat} (${p.per} ${p.perWhat}s)`,
  );
  if (p.split) {
    const share = p.split.benchDbBytes > 0 ? (100 * p.split.benchDbFpiBytes) / p.split.benchDbBytes : 0;
    console.log(
      `  bench db ${fmt(p.split.benchDbBytes)} B (images ${share.toFixed(0)}%), other ${fmt(p.split.otherBytes)} B` +
        (p.split.otherBytes > 0.05 * p.bytes ? '  <-- others wrote during this phase?' : ''),
    );
  }
  for (const s of p.steps) {
    console.log(
      `  cards-sync ${s.command}: ${fmt(s.bytes)} B (${fmt(s.bytes / Math.max(1, p.per))} per ${p.perWhat}), exit ${s.exit}`,
    );
    for (const [t, d] of Object.entries(s.tables)) {
      const notHot = d.upd - d.hot;
      console.log(
        `    ${t.padEnd(34)} ins ${String(d.ins).padStart(6)}  upd ${String(d.upd).padStart(6)}  hot ${String(d.hot).padStart(6)}  not-hot ${String(notHot).padStart(6)}  del ${String(d.del).padStart(5)}`,
      );
    }
    for (const b of s.byRelation ?? []) {
      if (p.per === 0 || b.bytes / p.per < 1) continue;
      console.log(
        `      WAL ${b.what.padEnd(44)} ${(b.bytes / p.per).toFixed(1).padStart(8)} ${(b.fpiBytes / p.per).toFixed(1).padStart(8)} per ${p.perWhat}`,
      );
    }
  }
  if (p.byRelation) {
    console.log(`  WAL per ${p.perWhat} by relation (bytes, of which full-page images):`);
    for (const b of p.byRelation) {
      if (p.per === 0 || b.bytes / p.per < 1) continue;
      console.log(
        `    ${b.what.padEnd(44)} ${(b.bytes / p.per).toFixed(1).padStart(8)} ${(b.fpiBytes / p.per).toFixed(1).padStart(8)}`,
      );
    }
  }
  if (p.byRecord) {
    console.log(
      `  WAL per ${p.perWhat} by relation and record ("sync": in a transaction that wrote a ledger row; records, bytes, images):`,
    );
    for (const b of p.byRecord) {
      if (p.per === 0 || b.bytes / p.per < 2) continue;
      console.log(
        `    ${b.what.padEnd(40)} ${b.record.padEnd(28)} ${(b.inSync ? 'sync' : 'other').padEnd(5)} ${String(b.count).padStart(7)} ${(b.bytes / p.per).toFixed(1).padStart(8)} ${(b.fpiBytes / p.per).toFixed(1).padStart(8)}`,
      );
    }
  }
}

const all: Phase[][] = [];
for (let r = 1; r <= repeats; r++) {
  const phases = await repeat(r);
  for (const p of phases) print(r, p);
  all.push(phases);
}

// The spread: a repeat far from the others is a phase someone else wrote during (see "other").
console.log(`\nbytes per subscriber (per sync for continuous), ${repeats} repeat(s), ${n} subscribers:`);
for (const name of all[0]!.map((p) => p.name)) {
  const xs = all.map((ps) => ps.find((p) => p.name === name)!).map((p) => p.bytes / p.per);
  const sorted = [...xs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  console.log(
    `  ${name.padEnd(28)} ${xs.map(fmt).join(' / ')}  median ${fmt(median)}, spread ${fmt(sorted.at(-1)! - sorted[0]!)} (${((100 * (sorted.at(-1)! - sorted[0]!)) / median).toFixed(1)}%)`,
  );
}
console.log(
  JSON.stringify({
    subscribers: n,
    repeats: all.map((ps) =>
      Object.fromEntries(
        ps.map((p) => [
          p.name,
          {
            bytes: p.bytes,
            per: p.per,
            perUnit: Math.round(p.bytes / p.per),
            steps: p.steps,
            split: p.split,
            byRelation: p.byRelation,
          },
        ]),
      ),
    ),
  }),
);

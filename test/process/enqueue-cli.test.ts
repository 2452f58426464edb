import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Target } from '../../src/api/index.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { CLI, type CliRun, runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// `cards-sync enqueue` as a user runs it: a child process, a file or standard input, a real Redis.

const database = useTestDatabase();
const cleanups = useCleanups();

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cards-sync-enqueue-test-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function setup() {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
  /** Every target on the queue, in the order it was added. */
  const targets = async (): Promise<Target[]> => {
    const jobs = await q.queue.getJobs(['waiting', 'prioritized'], 0, -1, true);
    return jobs.map((j) => j.data.target);
  };
  const total = async (): Promise<number> => {
    const c = await q.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active');
    return Object.values(c).reduce((a, b) => a + b, 0);
  };
  return { ...q, env, targets, total };
}

async function file(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

function summary(run: CliRun): { enqueued: number; alreadyQueued: number; rejected: number } {
  const m = /^enqueued (\d+), already queued (\d+), rejected (\d+)/m.exec(run.stdout);
  if (!m) throw new Error(`no summary in stdout: ${JSON.stringify(run.stdout)}`);
  return { enqueued: Number(m[1]), alreadyQueued: Number(m[2]), rejected: Number(m[3]) };
}

/** The `line K: reason` reports on stderr, in order. */
function rejects(run: CliRun): { line: number; reason: string }[] {
  return [...run.stderr.matchAll(/^line (\d+): (.*)$/gm)].map((m) => ({ line: Number(m[1]), reason: m[2]! }));
}

describe('enqueue from flags', () => {
  it('enqueues --id and --email values (repeatable), each job carrying its target', async () => {
    const q = setup();
    const run = await runCli(
      [
        'enqueue',
        '--id',
        '7',
        '--id',
        '9007199254740991',
        '--email',
        'Ada@Example.com',
        '--email',
        'x@localhost',
      ],
      q.env,
    );
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe('enqueued 4, already queued 0, rejected 0');
    expect(await q.targets()).toEqual([
      { subscriberId: 7 },
      { subscriberId: 9_007_199_254_740_991 },
      { email: 'Ada@Example.com' },
      { email: 'x@localhost' },
    ]);
    const [job] = await q.queue.getJobs(['waiting'], 0, 0, true);
    expect(job!.data).toEqual({ v: 1, target: { subscriberId: 7 }, trigger: 'manual' });
  });

  it('counts a repeated id, and an e-mail differing only in case, as already queued (exit 0)', async () => {
    const q = setup();
    const first = await runCli(['enqueue', '--id', '5', '--id', '5', '--email', 'Ada@Example.com'], q.env);
    expect(first.code).toBe(0);
    expect(summary(first)).toEqual({ enqueued: 2, alreadyQueued: 1, rejected: 0 });
    const second = await runCli(['enqueue', '--email', 'ada@EXAMPLE.com', '--id', '6'], q.env);
    expect(second.code).toBe(0);
    expect(summary(second)).toEqual({ enqueued: 1, alreadyQueued: 1, rejected: 0 });
    expect(await q.targets()).toEqual([
      { subscriberId: 5 },
      { email: 'Ada@Example.com' },
      { subscriberId: 6 },
    ]);
  });
});

describe('new subscribers', () => {
  it('an id not known before becomes a known subscriber, never synced, left to its job for an eighth of the max age; known ones stay as they are', async () => {
    const q = setup();
    const pool = database.handle.pool;
    await pool.query('delete from subscribers where subscriber_id in (880001, 880002)');
    await pool.query(
      `insert into subscribers (subscriber_id, last_success_at) values (880002, now() - interval '1 day')`,
    );
    const run = await runCli(
      ['enqueue', '--id', '880001', '--id', '880002', '--email', 'newcomer@example.com'],
      { ...q.env, REFRESH_MAX_AGE: '8h' },
    );
    expect(run.code, run.stderr).toBe(0);
    // The summary scripts read is as it was; the news is on stderr.
    expect(run.stdout.trim()).toBe('enqueued 3, already queued 0, rejected 0');
    expect(run.stderr).toContain(
      '1 of them was a new subscriber: known from now on, never synced until their job runs',
    );
    const { rows } = await pool.query<{ id: number; synced: boolean; due_in: number | null }>(
      `select s.subscriber_id as id, s.last_success_at is not null as synced,
          extract(epoch from q.due_at - now())::float8 as due_in
        from subscribers s join subscriber_schedule q using (subscriber_id)
        where s.subscriber_id in (880001, 880002) order by 1`,
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ id: 880001, synced: false });
    // An eighth of 8 h: the refresh takes it then if its job has not synced it.
    expect(rows[0]!.due_in).toBeGreaterThan(3500);
    expect(rows[0]!.due_in).toBeLessThanOrEqual(3600);
    expect(rows[1]).toEqual({ id: 880002, synced: true, due_in: null });
    const audit = await pool.query<{ detail: { registered: number } }>(
      `select detail from admin_actions where action = 'enqueue' order by id desc limit 1`,
    );
    expect(audit.rows[0]!.detail.registered).toBe(1);
  });

  it('without the database the ids are enqueued all the same, with a warning', async () => {
    const q = setup();
    const run = await runCli(['enqueue', '--id', '880003'], {
      ...q.env,
      DATABASE_URL: 'postgres://postgres:postgres@127.0.0.1:1/nowhere',
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('enqueued 1, already queued 0, rejected 0');
    expect(run.stderr).toMatch(
      /new subscribers could not be recorded as known \(they are enqueued all the same/,
    );
    expect(await q.targets()).toEqual([{ subscriberId: 880003 }]);
  });
});

describe('usage errors (exit 2, nothing enqueued)', () => {
  it.each([
    ['no source at all', [], /needs --id N, --email E or --file PATH/],
    ['--id abc', ['--id', 'abc'], /positive whole number/],
    ['--id 0', ['--id', '0'], /positive/],
    ['--id 2^53', ['--id', '9007199254740992'], /2\^53/],
    ['--email without @', ['--email', 'ada.example.com'], /name@domain/],
    ['--file without a path', ['--file'], /argument missing/],
    ['an unknown option', ['--nope'], /unknown option/],
    ['--email holding a list', ['--email', 'a@example.com,b@example.com'], /must not contain a comma/],
    ['--column 0', ['--column', '0', '--file', '-'], /--column takes the number of the column.*from 1/],
    ['--column two', ['--column', 'two', '--file', '-'], /--column takes the number of the column/],
    ['--column 1.5', ['--column', '1.5', '--file', '-'], /--column takes the number of the column/],
    [
      '--column without --file',
      ['--column', '2', '--id', '1'],
      /--column N picks a column of the lines of --file/,
    ],
  ])('%s', async (_what, args, message) => {
    const q = setup();
    const run = await runCli(['enqueue', ...(args as string[])], q.env);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stdout).not.toMatch(/enqueued/);
    expect(await q.total()).toBe(0);
  });

  it('--file of a missing path, and of a directory', async () => {
    const q = setup();
    const missing = await runCli(['enqueue', '--file', join(dir, 'no-such-file.txt')], q.env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
    const directory = await runCli(['enqueue', '--id', '1', '--file', dir], q.env);
    expect(directory.code).toBe(2);
    expect(directory.stderr).toContain('is a directory');
    // The --id beside a bad --file was not enqueued either.
    expect(await q.total()).toBe(0);
  });
});

describe('enqueue --file', () => {
  it('a messy file: exact counts, exact line numbers, the valid lines on the queue', async () => {
    const q = setup();
    // Random bytes on one line: a NUL and an 0xFF (never valid UTF-8) for sure, no line breaks.
    const garbage = Buffer.from(randomBytes(2000).map((b) => (b === 0x0a || b === 0x0d ? 0x01 : b)));
    garbage[0] = 0x00;
    garbage[1] = 0xff;
    const parts: (string | Buffer)[] = [
      /* 1 */ Buffer.from([0xef, 0xbb, 0xbf]),
      '101\r\n',
      /* 2 */ '\r\n',
      /* 3 */ '# a comment\r\n',
      /* 4 */ '  102\t \r\n',
      /* 5 */ '0\r\n',
      /* 6 */ '-1\n',
      /* 7 */ '9007199254740992\n',
      /* 8 */ '9007199254740993\n',
      /* 9 */ '9007199254740991\n',
      /* 10 */ 'abc\n',
      /* 11 */ '12a\n',
      /* 12 */ 'Ada@Example.com\r\n',
      /* 13 */ 'not-an-email@\n',
      /* 14 */ '@example.com\n',
      /* 15 */ 'ada lovelace@example.com\n',
      /* 16 */ 'ada@example..com\n',
      /* 17 */ 'ada@@example.com\n',
      /* 18 */ `${'9'.repeat(1024 * 1024)}\n`,
      /* 19 */ garbage,
      '\n',
      /* 20 */ '12\u00003\n',
      /* 21 */ 'ada\u0000@example.com\n',
      /* 22 */ '101\n',
      /* 23 */ 'ada@example.COM\n',
      /* 24 */ '   \n',
      /* 25 */ '103',
    ];
    const path = await file(
      'messy.txt',
      Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))),
    );
    const run = await runCli(['enqueue', '--file', path], q.env);
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 5, alreadyQueued: 2, rejected: 15 });
    const reported = rejects(run);
    expect(reported.map((r) => r.line)).toEqual([5, 6, 7, 8, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21]);
    const reasonOf = (line: number) => reported.find((r) => r.line === line)?.reason;
    expect(reasonOf(5)).toMatch(/positive/);
    expect(reasonOf(7)).toMatch(/2\^53/);
    expect(reasonOf(8)).toMatch(/2\^53/);
    expect(reasonOf(10)).toMatch(/neither a subscriber id/);
    expect(reasonOf(15)).toMatch(/spaces/);
    expect(reasonOf(17)).toMatch(/exactly one @/);
    expect(reasonOf(18)).toMatch(/1048576 bytes/);
    expect(reasonOf(19)).toMatch(/not valid UTF-8/);
    expect(reasonOf(21)).toMatch(/control characters/);
    // Neither the megabyte line nor the garbage is echoed back.
    expect(run.stderr.length).toBeLessThan(3000);
    expect(run.stderr).not.toContain('\u0000');
    expect(await q.targets()).toEqual([
      { subscriberId: 101 },
      { subscriberId: 102 },
      { subscriberId: 9_007_199_254_740_991 },
      { email: 'Ada@Example.com' },
      { subscriberId: 103 },
    ]);
  });

  it('an all-valid file exits 0; running it again counts every line as already queued', async () => {
    const q = setup();
    const path = await file('valid.txt', '1\n2\nb@example.com\n3\n');
    const first = await runCli(['enqueue', '--file', path], q.env);
    expect([first.code, first.stdout.trim()]).toEqual([0, 'enqueued 4, already queued 0, rejected 0']);
    expect(first.stderr).not.toMatch(/^line /m);
    const again = await runCli(['enqueue', '--file', path, '--id', '4'], q.env);
    expect([again.code, again.stdout.trim()]).toEqual([0, 'enqueued 1, already queued 4, rejected 0']);
    expect(await q.total()).toBe(5);
  });

  it("an export's header line names a column: skipped and said so; a word further down is still rejected", async () => {
    const q = setup();
    const path = await file('export.csv', 'subscriber_id\n21\n22\nsubscriber_id\n');
    const run = await runCli(['enqueue', '--file', path], q.env);
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 2, alreadyQueued: 0, rejected: 1 });
    expect(run.stderr).toContain('line 1 names a column (a header), not an id or an e-mail: skipped');
    expect(rejects(run).map((r) => r.line)).toEqual([4]);
    const quoted = await runCli(['enqueue', '--file', '-'], q.env, '"Customer E-mail"\r\nd@example.com\r\n');
    expect([quoted.code, quoted.stdout.trim()]).toEqual([0, 'enqueued 1, already queued 0, rejected 0']);
    // An id or an e-mail on line 1 is a target like any other.
    const plain = await runCli(['enqueue', '--file', '-'], q.env, '23\n');
    expect([plain.code, plain.stdout.trim()]).toEqual([0, 'enqueued 1, already queued 0, rejected 0']);
    // Standard error may say the subscriber is new; nothing of a header or a rejected line.
    expect(plain.stderr).not.toMatch(/header|line 1/);
  });

  it('reads standard input with --file -', async () => {
    const q = setup();
    const run = await runCli(['enqueue', '--file', '-'], q.env, '11\r\n12\r\nbad\r\nc@example.com');
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 3, alreadyQueued: 0, rejected: 1 });
    expect(rejects(run).map((r) => r.line)).toEqual([3]);
    expect(await q.targets()).toEqual([
      { subscriberId: 11 },
      { subscriberId: 12 },
      { email: 'c@example.com' },
    ]);
  });

  it('lists the first 20 rejected lines, then how many more', async () => {
    const q = setup();
    const lines = ['1'];
    for (let i = 0; i < 25; i++) lines.push(`bad-${i}`);
    lines.push('2');
    const path = await file('many-bad.txt', `${lines.join('\n')}\n`);
    for (const strict of [false, true]) {
      const run = await runCli(['enqueue', '--file', path, ...(strict ? ['--strict'] : [])], q.env);
      expect(run.code).toBe(1);
      expect(rejects(run).map((r) => r.line)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      expect(run.stderr).toMatch(/^… and 5 more rejected lines$/m);
      expect(summary(run).rejected).toBe(25);
    }
    expect(await q.targets()).toEqual([{ subscriberId: 1 }, { subscriberId: 2 }]);
  });
});

describe('enqueue --strict', () => {
  it.each(['file', 'stdin'])('a bad line in a %s: nothing is enqueued', async (how) => {
    const q = setup();
    const content = '1\n2\n\n# comment\n3\nnope\n4';
    const run =
      how === 'file'
        ? await runCli(['enqueue', '--strict', '--file', await file('strict-bad.txt', content)], q.env)
        : await runCli(['enqueue', '--strict', '--file', '-'], q.env, content);
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 0, alreadyQueued: 0, rejected: 1 });
    expect(run.stdout).toContain('nothing enqueued');
    expect(rejects(run).map((r) => r.line)).toEqual([6]);
    expect(await q.total()).toBe(0);
  });

  it.each(['file', 'stdin'])('a clean %s: everything is enqueued', async (how) => {
    const q = setup();
    const content = '\ufeff1\r\n2\r\n\r\n# comment\r\n3\r\nd@example.com\r\n1\r\n';
    const run =
      how === 'file'
        ? await runCli(['enqueue', '--strict', '--file', await file('strict-ok.txt', content)], q.env)
        : await runCli(['enqueue', '--strict', '--file', '-'], q.env, content);
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe('enqueued 4, already queued 1, rejected 0');
    expect(await q.targets()).toEqual([
      { subscriberId: 1 },
      { subscriberId: 2 },
      { subscriberId: 3 },
      { email: 'd@example.com' },
    ]);
  });
});

describe('CSV exports', () => {
  const EXPORT =
    'subscriber_id,email,plan\r\n1,subscriber-1@example.com,pro\r\n2,"subscriber-2@example.com",free\r\n3,subscriber-3@example.com,pro\r\n';

  it('without --column each row is refused with its line number and the column to pick: nothing enqueued', async () => {
    const q = setup();
    const run = await runCli(['enqueue', '--file', await file('export.csv', EXPORT)], q.env);
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 0, alreadyQueued: 0, rejected: 4 });
    const row =
      'has commas: a CSV row (3 columns), not one id or e-mail; column 1 holds a subscriber id: use --column 1 (or cut -d, -f1)';
    expect(rejects(run)).toEqual([
      {
        line: 1,
        reason:
          'a CSV header (3 columns), not an id or an e-mail: name the column with --column N (or cut -d, -fN); its header is then skipped',
      },
      { line: 2, reason: row },
      { line: 3, reason: row },
      { line: 4, reason: row },
    ]);
    // A row of e-mails only: the reason points at the e-mail's column.
    const list = await runCli(['enqueue', '--file', '-'], q.env, 'Ada,ada@example.com\n');
    expect(rejects(list)).toEqual([
      {
        line: 1,
        reason:
          'has commas: a CSV row (2 columns), not one id or e-mail; column 2 holds an e-mail: use --column 2 (or cut -d, -f2)',
      },
    ]);
    expect(await q.total()).toBe(0);
  });

  it('--column N reads that field of each row (quoted fields too) and skips the header', async () => {
    const q = setup();
    const path = await file('export-2.csv', EXPORT);
    const emails = await runCli(['enqueue', '--file', path, '--column', '2'], q.env);
    expect([emails.code, emails.stdout.trim()]).toEqual([0, 'enqueued 3, already queued 0, rejected 0']);
    expect(emails.stderr).toContain('line 1 names a column (a header), not an id or an e-mail: skipped');
    const ids = await runCli(['enqueue', '--file', '-', '--column', '1'], q.env, EXPORT);
    expect([ids.code, ids.stdout.trim()]).toEqual([0, 'enqueued 3, already queued 0, rejected 0']);
    expect(await q.targets()).toEqual([
      { email: 'subscriber-1@example.com' },
      { email: 'subscriber-2@example.com' },
      { email: 'subscriber-3@example.com' },
      { subscriberId: 1 },
      { subscriberId: 2 },
      { subscriberId: 3 },
    ]);
  });

  it('--column: a comma inside quotes stays in its field; short rows, empty fields and open quotes are refused', async () => {
    const q = setup();
    const content = [
      /* 1 */ 'id,name,email',
      /* 2 */ '5,"Yılmaz, Ayşe",ayse@example.com',
      /* 3 */ '6,"Ada ""the Countess"" Lovelace",ada@example.com',
      /* 4 */ '7,Short',
      /* 5 */ '8,Empty,',
      /* 6 */ '9,"Open, quote,nine@example.com',
      /* 7 */ '10,Two,"a@example.com,b@example.com"',
    ].join('\n');
    const run = await runCli(['enqueue', '--file', '-', '--column', '3'], q.env, content);
    expect(run.code).toBe(1);
    expect(summary(run)).toEqual({ enqueued: 2, alreadyQueued: 0, rejected: 4 });
    expect(rejects(run)).toEqual([
      { line: 4, reason: 'has 2 columns, no 3rd (--column 3)' },
      { line: 5, reason: 'column 3 is empty' },
      { line: 6, reason: 'a quoted field ("…) does not close on this line' },
      { line: 7, reason: expect.stringMatching(/must not contain a comma/) },
    ]);
    expect(await q.targets()).toEqual([{ email: 'ayse@example.com' }, { email: 'ada@example.com' }]);
  });

  it('--strict --column: the header is skipped, not refused; one bad row refuses the whole file', async () => {
    const q = setup();
    const clean = await runCli(['enqueue', '--strict', '--file', '-', '--column', '2'], q.env, EXPORT);
    expect([clean.code, clean.stdout.trim()]).toEqual([0, 'enqueued 3, already queued 0, rejected 0']);
    const header = await runCli(['enqueue', '--strict', '--file', '-'], q.env, 'subscriber_id\n4\n');
    expect([header.code, header.stdout.trim()]).toEqual([0, 'enqueued 1, already queued 0, rejected 0']);
    const bad = await runCli(
      ['enqueue', '--strict', '--file', '-', '--column', '2'],
      q.env,
      `${EXPORT}4,subscriber-4@example.com;x@example.com,pro\n`,
    );
    expect(bad.code).toBe(1);
    expect(bad.stdout.trim()).toBe('enqueued 0, already queued 0, rejected 1 (--strict: nothing enqueued)');
    expect(rejects(bad)).toEqual([{ line: 5, reason: expect.stringMatching(/semicolon/) }]);
    expect(await q.total()).toBe(4);
  });
});

describe('streaming', () => {
  it('enqueues lines before the input ends (chunks of 1000)', async () => {
    const q = setup();
    const p = startCli(['enqueue', '--file', '-'], q.env);
    cleanups.push(async () => {
      if (p.process.exitCode === null && p.process.signalCode === null) p.process.kill('SIGKILL');
      await p.done;
    });
    const lines = Array.from({ length: 2500 }, (_, i) => `${1_000_000 + i}\n`).join('');
    p.process.stdin!.write(lines);
    await waitFor(
      '2000 waiting jobs while standard input is still open',
      // A file's lines take the bulk lane: BullMQ's prioritized set.
      async () => (await q.queue.getJobCounts('prioritized')).prioritized! >= 2000,
    );
    expect(p.process.exitCode).toBeNull();
    expect(p.process.stdin!.writableEnded).toBe(false);
    p.process.stdin!.end();
    const run = await p.done;
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe('enqueued 2500, already queued 0, rejected 0');
    expect((await q.queue.getJobCounts('prioritized')).prioritized).toBe(2500);
  });

  it('prints periodic plain progress lines on a non-terminal stderr', async () => {
    const q = setup();
    const p = startCli(['enqueue', '--file', '-'], q.env);
    cleanups.push(async () => {
      if (p.process.exitCode === null && p.process.signalCode === null) p.process.kill('SIGKILL');
      await p.done;
    });
    const progress = /^enqueue: \d+ lines read, \d+ enqueued, \d+ already queued, \d+ rejected$/m;
    // A line every 100 ms until a progress line shows (the CLI may take a while to start on a busy
    // machine, and lines buffered meanwhile are read in one go), for 15 s at most.
    let written = 0;
    const until = Date.now() + 15_000;
    while ((written < 26 || !progress.test(p.stderr())) && Date.now() < until) {
      p.process.stdin!.write(`${2_000_000 + written}\n`);
      written++;
      await sleep(100);
    }
    p.process.stdin!.end('oops\n');
    const run = await p.done;
    expect(run.code).toBe(1);
    expect(run.stdout.trim()).toBe(`enqueued ${written}, already queued 0, rejected 1`);
    expect(run.stderr).toMatch(progress);
    expect(run.stderr).not.toContain('\u001b');
    expect(rejects(run).map((r) => r.line)).toEqual([written + 1]);
  });

  it('a 1,000,000-line file checked with --strict stays small in memory', async () => {
    const q = setup();
    const file = async (lines: string[]) => {
      const path = join(tmpdir(), `cards-sync-lines-${randomBytes(4).toString('hex')}.txt`);
      cleanups.push(() => rm(path, { force: true }));
      await writeFile(path, `${lines.join('\n')}\n`);
      return path;
    };
    const ids: string[] = [];
    for (let i = 1; i < 1_000_000; i++) ids.push(String(i));
    ids.push('not-an-id');
    const million = await file(ids);
    const three = await file(['1', '2', 'not-an-id']);

    const timeBin = '/usr/bin/time';
    const measure = existsSync(timeBin);
    /** One `enqueue --strict --file path`: its output, and its peak resident memory in KiB when /usr/bin/time is there. */
    const enqueueStrict = async (path: string) => {
      const args = ['enqueue', '--strict', '--file', path];
      // Node 24's V8 grows its young generation under allocation pressure, by as much as it likes
      // (docs/scaling.md, "Memory"): a run that retains nothing peaked anywhere from 40 to 200 MB
      // above the small one. A fixed semi-space keeps the figure about what the command holds.
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        NODE_OPTIONS: '--max-semi-space-size=16',
        ...q.env,
      };
      const child = measure
        ? spawn(timeBin, ['-f', 'peak-rss-kb %M', process.execPath, CLI, ...args], {
            env,
            stdio: ['ignore', 'pipe', 'pipe'],
          })
        : spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => {
        stdout += s;
      });
      child.stderr.setEncoding('utf8').on('data', (s: string) => {
        stderr += s;
      });
      const [code] = await once(child, 'close');
      const m = /peak-rss-kb (\d+)/.exec(stderr);
      if (measure) expect(m, stderr).not.toBeNull();
      return { code, stdout, stderr, peakKb: m ? Number(m[1]) : undefined };
    };

    const run = await enqueueStrict(million);
    expect(run.code).toBe(1);
    expect(run.stdout.trim()).toBe('enqueued 0, already queued 0, rejected 1 (--strict: nothing enqueued)');
    expect(run.stderr).toMatch(/^line 1000000: neither a subscriber id/m);
    expect(await q.total()).toBe(0);
    if (measure) {
      // The same command on a three-line file: what the process costs before any line. Loading
      // the CLI stays cheap (src/cli/drizzle-resolve.ts; about 125 MB here, 260 MB without it),
      // and a million lines add a bounded amount on top (about 40 MB, read 256 KB at a time).
      const small = await enqueueStrict(three);
      expect(small.code).toBe(1);
      expect(small.peakKb!).toBeLessThan(160 * 1024);
      expect(run.peakKb! - small.peakKb!).toBeLessThan(64 * 1024);
    }
  }, 30_000);
});

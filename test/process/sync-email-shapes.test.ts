import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { createMetrics } from '../../src/metrics/index.js';
import { parseEmail, TargetError } from '../../src/sync/parse.js';
import { prng } from '../support/card-numbers.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// E-mail shapes RFC 5321 allows (and some it does not), through every edge that enqueues: each
// line or item is either enqueued or refused with its reason, and none fails the others.

const database = useTestDatabase();
const ATEXT = "abcXYZ0189!#$%&'*+-/=?^_`{|}~";
const DOMAINS = [
  'example.com',
  'mail.example.co.uk',
  '[127.0.0.1]',
  '[IPv6:2001:db8::1]',
  'bücher.example',
  'xn--bcher-kva.example',
  '例え.jp',
  'a',
];

/** Local parts: atoms of atext joined by dots, quoted strings, UTF-8, colons, the longest allowed. */
function shapes(count: number, seed: number): string[] {
  const random = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const atom = () => Array.from({ length: 1 + Math.floor(random() * 8) }, () => pick([...ATEXT])).join('');
  const out = [
    'a:b@example.com',
    '"a b"@example.com',
    '"a@b"@example.com',
    '"quoted"@example.com',
    'ünïcödé@example.com',
    '用户@例子.广告',
    `${'l'.repeat(64)}@example.com`,
    `${'l'.repeat(64)}@${'d'.repeat(180)}.example.com`,
    `${'l'.repeat(64)}@${'d'.repeat(190)}.example.com`,
    'trailing.dot.@example.com',
    'a..b@example.com',
    'percent%2F@example.com',
    'hash#frag@example.com',
    'q?x=1@example.com',
    'slash/../x@example.com',
  ];
  while (out.length < count) {
    const local = Array.from({ length: 1 + Math.floor(random() * 3) }, atom).join('.');
    out.push(`${local}@${pick(DOMAINS)}`);
  }
  return out;
}

const EMAILS = shapes(120, 5321);
const verdicts = EMAILS.map((e) => {
  try {
    parseEmail(e);
    return true;
  } catch (error) {
    if (!(error instanceof TargetError)) throw error;
    return false;
  }
});
const acceptedCount = verdicts.filter(Boolean).length;

it('the generated shapes exercise both verdicts', () => {
  expect(acceptedCount).toBeGreaterThan(100);
  expect(EMAILS.length - acceptedCount).toBeGreaterThan(2);
});

describe('POST /api/resync', () => {
  const q = testQueue();
  let admin: ReturnType<typeof createAdminApp>;
  beforeAll(() => {
    admin = createAdminApp({
      db: database.handle.db,
      redis: q.redis,
      syncQueue: q.queue,
      refreshQueue: createRefreshQueue(q.redis, q.prefix),
      metrics: createMetrics({ defaultMetrics: false }),
      logger: captureLogger('info').logger,
      adminToken: ADMIN_TOKEN,
      prefix: q.prefix,
    });
  });
  afterAll(() => q.cleanup());

  it('answers per item: every accepted shape enqueued beside the refused ones, never a 500', async () => {
    const res = await admin.app.fetch(
      new Request('http://admin.test/api/resync', {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ emails: EMAILS, subscriberIds: [1, 2] }),
      }),
    );
    expect(res.status).toBe(400);
    const body = (await res.json()) as {
      enqueued: number;
      rejected: number;
      errors: { index: number; reason: string }[];
    };
    expect(body.enqueued).toBe(acceptedCount + 2);
    expect(body.rejected).toBe(EMAILS.length - acceptedCount);
    for (const e of body.errors) expect(verdicts[e.index], EMAILS[e.index]).toBe(false);
    const jobs = await q.queue.getJobs(['waiting', 'prioritized'], 0, -1, true);
    expect(jobs).toHaveLength(acceptedCount + 2);
    for (const job of jobs) expect(job.id).not.toMatch(/@/);
  });
});

describe('enqueue --file', () => {
  const q = testQueue();
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cards-sync-email-shapes-'));
  });
  afterAll(async () => {
    await q.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('enqueues every accepted line and reports each refused one by its line number', async () => {
    const path = join(dir, 'emails.txt');
    await writeFile(path, `${EMAILS.join('\n')}\n`);
    const run = await runCli(['enqueue', '--file', path], {
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      DATABASE_URL: database.url,
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `enqueued ${acceptedCount}, already queued 0, rejected ${EMAILS.length - acceptedCount}`,
    );
    const refusedLines = [...run.stderr.matchAll(/^line (\d+): /gm)].map((m) => Number(m[1]));
    expect(refusedLines.sort((a, b) => a - b)).toEqual(
      verdicts.flatMap((ok, i) => (ok ? [] : [i + 1])).slice(0, refusedLines.length),
    );
    const c = await q.queue.getJobCounts('waiting', 'prioritized');
    expect((c.waiting ?? 0) + (c.prioritized ?? 0)).toBe(acceptedCount);
  });
});

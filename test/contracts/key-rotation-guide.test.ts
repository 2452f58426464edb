import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { liveFleet } from '../../src/fleet/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { cardTokens, parseKeyRing } from '../../src/tokens/index.js';
import { TEST_TOKEN_KEY, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// The key-rotation guide, run as written: docs/security.md's "Rotating keys" block is
// read line by line and followed against real Postgres and Redis, with two worker processes (the
// built CLI) syncing meanwhile. A `cards-sync worker` line restarts each worker with the ring the
// guide exported, one at a time, as the guide says; any other `cards-sync` line runs as a command.
// A step that is refused (a worker that exits instead of joining the fleet, a command that does
// not exit 0) fails the test, so the one-step order (new key first at once) cannot come back.

const GUIDE = new URL('../../docs/security.md', import.meta.url);

/** One line of the guide's block: what to run, and the output its comment quotes, if any. */
interface GuideLine {
  line: string;
  says?: string;
}

/** The shell block of the section under `heading`, as lines to follow (comments apart). */
function guideSteps(markdown: string, heading = '### Rotating keys'): GuideLine[] {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`no section "${heading}"`);
  const rest = markdown.slice(at + heading.length + 2);
  const fence = /```sh\n([\s\S]*?)```/.exec(rest);
  // The block must be the section's own: no heading comes before it.
  if (fence === null || /(^|\n)#{1,6} /.test(rest.slice(0, fence.index))) {
    throw new Error(`no sh block under "${heading}"`);
  }
  const block = fence[1]!;
  return block
    .split('\n')
    .map((raw) => {
      const [, line = '', comment = ''] = /^(.*?)(?:\s+#\s*(.*))?$/.exec(raw.trim())!;
      const says = /"([^"]+)"/.exec(comment)?.[1];
      return says === undefined ? { line } : { line, says };
    })
    .filter((l) => l.line !== '' && !l.line.startsWith('#'));
}

/** The words of `text` as bash expands them (quotes, `$VAR`, `$(…)`) in environment `env`. */
function expand(text: string, env: Record<string, string>): string[] {
  const out = spawnSync('bash', ['-c', `printf '%s\\0' ${text}`], { env, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`bash could not expand ${text}: ${out.stderr}`);
  return out.stdout.split('\0').slice(0, -1);
}

const squeeze = (s: string) => s.replace(/\s+/g, ' ');

interface Run {
  /** The environment every process gets besides the shell's variables (database, Redis, API). */
  base: Record<string, string>;
  /** The shell's variables: what the guide's lines read and export. */
  shell: Record<string, string>;
  workers: CliProcess[];
  startWorker(args: string[], env: Record<string, string>): CliProcess;
}

/** Follows the guide's lines; throws at the first step that is refused or not understood. */
async function follow(lines: readonly GuideLine[], run: Run, pool: Parameters<typeof liveFleet>[0]) {
  for (const { line, says } of lines) {
    const assignment = /^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (assignment) {
      run.shell[assignment[1]!] = expand(assignment[2]!, run.shell).join(' ');
      continue;
    }
    if (!line.startsWith('cards-sync ')) throw new Error(`the guide's line is not followed here: ${line}`);
    const args = expand(line.slice('cards-sync '.length), run.shell);
    const env = { ...run.base, ...run.shell };
    if (args[0] === 'worker') {
      // Restart each worker with the ring now exported, one at a time.
      for (let i = 0; i < run.workers.length; i++) {
        const old = run.workers[i]!;
        old.process.kill('SIGTERM');
        const stopped = await old.done;
        if (stopped.code !== 0)
          throw new Error(`a worker stopped with exit ${stopped.code}: ${stopped.stderr}`);
        const next = run.startWorker(args.slice(1), env);
        run.workers[i] = next;
        const joined = await waitFor(
          `the worker restarted by "${line}" to join the fleet`,
          async () =>
            next.process.exitCode !== null || (await liveFleet(pool)).some((p) => p.pid === next.process.pid),
          20_000,
        );
        if (joined && next.process.exitCode !== null) {
          const { code, stderr } = await next.done;
          throw new Error(`"${line}" refused: the restarted worker exited ${code}: ${stderr.trim()}`);
        }
      }
      continue;
    }
    const done = await runCli(args, env);
    if (done.code !== 0) {
      throw new Error(`"${line}" refused: exit ${done.code}: ${(done.stderr || done.stdout).trim()}`);
    }
    if (says !== undefined && !squeeze(done.stdout + done.stderr).includes(squeeze(says))) {
      throw new Error(`"${line}" did not say "${says}":\n${done.stdout}${done.stderr}`);
    }
  }
}

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();

/** Two workers syncing under `k1:OLD_KEY` (the ring the guide starts from), 60 subscribers stored. */
async function fleetUnderOldKey(firstId: number) {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const base = workerEnv({
    databaseUrl: database.url,
    redisUrl: inject('redisUrl'),
    prefix: q.prefix,
    apiUrl: upstream.url,
  });
  delete base.CARD_TOKEN_KEYS;
  const shell: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    OLD_KEY: TEST_TOKEN_KEY,
    CARD_TOKEN_KEYS: `k1:${TEST_TOKEN_KEY}`,
  };
  const run: Run = {
    base,
    shell,
    workers: [],
    startWorker(args, env) {
      const child = startCli(['worker', ...args, '--concurrency', '4'], env);
      cleanups.push(async () => {
        if (child.process.exitCode === null) child.process.kill('SIGKILL');
        await child.done;
      });
      return child;
    },
  };
  run.workers = [run.startWorker([], { ...base, ...shell }), run.startWorker([], { ...base, ...shell })];
  const pool = database.handle.pool;
  await waitFor('two workers in the fleet', async () => (await liveFleet(pool)).length === 2, 20_000);
  const ids = Array.from({ length: 120 }, (_, i) => firstId + i);
  const enqueue = (some: number[]) =>
    runCli(['enqueue', ...some.flatMap((id) => ['--id', String(id)])], { ...base, ...shell });
  expect((await enqueue(ids.slice(0, 60))).code).toBe(0);
  const synced = async () =>
    (
      await pool.query<{ n: number }>(
        'select count(*)::int as n from subscribers where subscriber_id = any($1) and last_success_at is not null',
        [ids],
      )
    ).rows[0]!.n;
  await waitFor('the first 60 subscribers synced under k1', async () => (await synced()) === 60, 60_000);
  return { q, run, pool, ids, enqueue, synced };
}

describe('docs/security.md, "Rotating keys", run as written', () => {
  it('with two workers syncing: no step is refused, and every stored token ends sealed under the new key', async () => {
    const steps = guideSteps(readFileSync(GUIDE, 'utf8'));
    expect(steps.some((s) => s.line === 'cards-sync tokens rotate')).toBe(true);
    const { q, run, pool, ids, enqueue, synced } = await fleetUnderOldKey(9_350_001);
    // Syncs go on through the rolls: 60 more subscribers are queued as the guide begins.
    expect((await enqueue(ids.slice(60))).code).toBe(0);
    await follow(steps, run, pool);

    await waitFor('every subscriber synced', async () => (await synced()) === ids.length, 60_000);
    await waitFor('the queue drained', async () => {
      const c = await q.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(c).every((n) => n === 0);
    });
    expect(await q.queue.getJobCounts('failed')).toEqual({ failed: 0 });
    const keyFailures = await pool.query<{ n: number }>(
      `select count(*)::int as n from sync_runs where error_code = 'token_key_unknown'`,
    );
    expect(keyFailures.rows[0]!.n).toBe(0);
    // Every token sealed under k2, the new key, and each opens to what the API served.
    const keys = parseKeyRing(run.shell.CARD_TOKEN_KEYS!);
    expect(keys.primaryId).toBe('k2');
    const ring = cardTokens(true, keys);
    const rows = await pool.query<{ id: number; card_token: string; card_token_fingerprint: string }>(
      'select id, card_token, card_token_fingerprint from saved_cards where subscriber_id = any($1)',
      [ids],
    );
    const served = new Map(ids.flatMap((id) => cardsFor(id).map((c) => [c.id, c.cardToken] as const)));
    expect(rows.rows.length).toBe(served.size);
    const wrong = rows.rows.filter(
      (r) =>
        r.card_token.split(':')[1] !== 'k2' ||
        ring.reveal(r.id, { value: r.card_token, fingerprint: r.card_token_fingerprint }) !==
          served.get(r.id),
    );
    expect(wrong.map((r) => r.id)).toEqual([]);
  }, 180_000);

  it('the one-step order (new key first at once) is refused at its first restart, which is why the guide has two', async () => {
    const oneStep = guideSteps(`
### Rotating keys

\`\`\`sh
NEW_KEY="$(openssl rand -base64 32)"
export CARD_TOKEN_KEYS="k2:$NEW_KEY,k1:$OLD_KEY"   # the new key first, the old one after it
cards-sync worker                                  # restart the workers
cards-sync tokens rotate
\`\`\`
`);
    const { run, pool } = await fleetUnderOldKey(9_360_001);
    await expect(follow(oneStep, run, pool)).rejects.toThrow(
      /"cards-sync worker" refused: the restarted worker exited 2: .*first key k2 is not in the ring of 1 live worker/,
    );
  }, 120_000);
});

describe('guideSteps', () => {
  it("reads the lines of the section's sh block, and the output a comment quotes", () => {
    const steps = guideSteps(
      '## A\n\n### Rotating keys\n\nText.\n\n```sh\nX="1"  # set\n# a comment\ncards-sync doctor   # "ok all"\n```\n\n### Next\n\n```sh\nnot this\n```\n',
    );
    expect(steps).toEqual([{ line: 'X="1"' }, { line: 'cards-sync doctor', says: 'ok all' }]);
  });
});

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { run } from '../../src/cli/program.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { cardTokens, fetchCardToken } from '../../src/tokens/index.js';
import { newKeyMaterial, parseKeyRing, sealedKeyId } from '../../src/tokens/keyring.js';
import { API_KEY, CARD_TOKEN_KEYS, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { archiveLog } from '../support/log-archive.js';
import { CLI } from '../support/queue-helpers.js';

// `cards-sync token --card-id N` and `cards-sync tokens rotate`, as a user runs them, on cards the
// mock API served (deterministic 32-hex-digit tokens).

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');
const NEW_KEY = newKeyMaterial();
/** The ring after a rotation is ordered: the new key first, the old one still there. */
const ROTATED = `test2:${NEW_KEY},${CARD_TOKEN_KEYS}`;
let api: ApiClient;
/** Every token the mock API served, by card id. */
const served = new Map<number, string>();

/** Runs the built CLI; its stdout may hold a token, so only stderr goes to the secret search. */
async function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: database.url, CARD_TOKEN_KEYS, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const [code] = await once(child, 'exit');
  archiveLog(`cards-sync ${args.join(' ')} (stderr)`, stderr);
  return { code: code as number | null, stdout, stderr, child };
}

const q = <T>(text: string) => database.handle.db.execute<T & Record<string, unknown>>(sql.raw(text));

/** pg_dump of the whole database, as an operator would take a backup. */
function dump(): string {
  const out = spawnSync('pg_dump', ['--no-owner', database.url], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  expect(out.status, out.stderr).toBe(0);
  return out.stdout;
}

function tokensIn(text: string): string[] {
  return [...served.values()].filter((t) => text.includes(t));
}

beforeAll(async () => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 5000 });
  const tokens = cardTokens(true, parseKeyRing(CARD_TOKEN_KEYS));
  for (let id = 7001; id <= 7200; id++) {
    const answer = await api.fetchCards({ subscriberId: id });
    if (answer.kind !== 'ok') throw new Error(`mock API: ${answer.kind}`);
    for (const c of answer.cards) served.set(c.id, c.cardToken);
    const r = await syncSubscriber(
      { db: database.handle.db, api, logger, tokens },
      { target: { subscriberId: id }, trigger: 'manual' },
    );
    expect(r.status).toBe('succeeded');
  }
});
afterAll(async () => {
  await api.close();
});

describe('cards-sync token --card-id N', () => {
  it('prints the one token on stdout for a pipe, and leaves an audit row without it', async () => {
    const [cardId, token] = [...served.entries()][0]!;
    const r = await cli(['token', '--card-id', String(cardId)]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${token}\n`);
    const audit = await q<{
      actor: string;
      source: string;
      detail: { cardId: number; subscriberId: number };
    }>(
      `select actor, source, detail from admin_actions where action = 'token_read' order by id desc limit 1`,
    );
    expect(audit.rows[0]).toMatchObject({ source: 'cli', detail: { cardId, subscriberId: 7001 } });
    expect(audit.rows[0]!.actor).not.toBe('');
    expect(JSON.stringify(audit.rows)).not.toContain(token);
  });

  it('refuses a terminal without --force (exit 2, nothing read, no audit row)', async () => {
    const [cardId] = [...served.keys()];
    const before = await q<{ n: number }>(`select count(*)::int as n from admin_actions`);
    const out: string[] = [];
    const err: string[] = [];
    const code = await run(['token', '--card-id', String(cardId)], {
      env: { DATABASE_URL: database.url, CARD_TOKEN_KEYS },
      out: (l) => out.push(l),
      err: (l) => err.push(l),
      stdoutIsTTY: true,
    });
    expect(code).toBe(2);
    expect(out).toEqual([]);
    expect(err.join('\n')).toMatch(
      /refusing to print a card token to a terminal: pipe it .* or pass --force/,
    );
    expect((await q<{ n: number }>(`select count(*)::int as n from admin_actions`)).rows[0]!.n).toBe(
      before.rows[0]!.n,
    );
  });

  it('says so for a card that is not stored, and for a ring without the key (exit 1, no token printed)', async () => {
    const missing = await cli(['token', '--card-id', '999999999']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('card 999999999 is not stored');
    const [cardId] = [...served.keys()];
    const wrongRing = await cli(['token', '--card-id', String(cardId)], {
      CARD_TOKEN_KEYS: `other:${newKeyMaterial()}`,
    });
    expect(wrongRing.code).toBe(1);
    expect(wrongRing.stdout).toBe('');
    expect(wrongRing.stderr).toMatch(/sealed under key test1, which CARD_TOKEN_KEYS does not hold/);
  });

  it('the package exports the same read for a billing job (fetchCardToken), audited as well', async () => {
    const [cardId, token] = [...served.entries()][1]!;
    expect(
      await fetchCardToken({
        databaseUrl: database.url,
        keys: CARD_TOKEN_KEYS,
        cardId,
        actor: 'billing-job',
      }),
    ).toBe(token);
    const audit = await q<{ actor: string }>(
      `select actor from admin_actions where action = 'token_read' order by id desc limit 1`,
    );
    expect(audit.rows[0]!.actor).toBe('billing-job');
    // …under the package's own name, as a billing job imports it.
    const pkg = (await import('cards-sync' as string)) as typeof import('../../src/index.js');
    expect(pkg.fetchCardToken).toBeTypeOf('function');
    expect(pkg.parseKeyRing).toBeTypeOf('function');
  });
});

describe('cards-sync tokens rotate', () => {
  it('a dump holds none of the served tokens; a rotation killed half-way loses nothing, and a rerun finishes it', async () => {
    const total = (await q<{ n: number }>(`select count(*)::int as n from saved_cards`)).rows[0]!.n;
    expect(total).toBe(served.size);
    expect(served.size).toBeGreaterThan(300);
    // Two rows stored before encryption was on: in plain text until the rotation.
    const plainIds = [...served.keys()].slice(-2);
    await q(
      `update saved_cards set card_token = 'tok-plain-' || id, card_token_fingerprint = null where id in (${plainIds.join(',')})`,
    );
    for (const id of plainIds) served.set(id, `tok-plain-${id}`);
    expect(tokensIn(dump())).toEqual(plainIds.map((id) => `tok-plain-${id}`));

    const killed = spawn(
      process.execPath,
      [CLI, 'tokens', 'rotate', '--batch-size', '20', '--pause-ms', '100'],
      {
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: database.url, CARD_TOKEN_KEYS: ROTATED },
      },
    );
    let progress = '';
    killed.stderr.on('data', (d) => {
      progress += d;
    });
    await new Promise<void>((resolve) => {
      killed.stderr.on('data', () => {
        if (/re-sealed under key test2/.test(progress)) resolve();
      });
    });
    killed.kill('SIGKILL');
    await once(killed, 'exit');
    archiveLog('cards-sync tokens rotate (killed)', progress);
    const midway = await q<{ id: number; card_token: string; card_token_fingerprint: string | null }>(
      `select id, card_token, card_token_fingerprint from saved_cards order by id`,
    );
    expect(midway.rows).toHaveLength(total);
    const underNew = midway.rows.filter((r) => sealedKeyId(r.card_token) === 'test2').length;
    expect(underNew).toBeGreaterThan(0);
    expect(underNew).toBeLessThan(total);
    // Every row still holds its token, under whichever key it has now.
    const both = cardTokens(true, parseKeyRing(ROTATED));
    for (const r of midway.rows) {
      expect(both.reveal(r.id, { value: r.card_token, fingerprint: r.card_token_fingerprint })).toBe(
        served.get(r.id),
      );
    }

    const rerun = await cli(['tokens', 'rotate'], { CARD_TOKEN_KEYS: ROTATED });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout).toMatch(
      /re-sealed \d+ tokens under key test2 \(\d+ had been stored in plain text\)/,
    );
    expect(rerun.stdout).toContain('every stored token is sealed under key test2');
    const after = await q<{ id: number; card_token: string; card_token_fingerprint: string }>(
      `select id, card_token, card_token_fingerprint from saved_cards order by id`,
    );
    expect(after.rows).toHaveLength(total);
    const onlyNew = cardTokens(true, parseKeyRing(`test2:${NEW_KEY}`));
    for (const r of after.rows) {
      expect(sealedKeyId(r.card_token)).toBe('test2');
      expect(onlyNew.reveal(r.id, { value: r.card_token, fingerprint: r.card_token_fingerprint })).toBe(
        served.get(r.id),
      );
    }
    expect(tokensIn(dump())).toEqual([]);
    const audit = await q<{ detail: { state: string } }>(
      `select detail from admin_actions where action = 'tokens_rotate' order by id`,
    );
    expect(audit.rows.map((r) => r.detail.state)).toEqual(['started', 'started', 'finished']);
  }, 120_000);

  it('a second rotation has nothing to do; without keys, or with encryption off, it refuses to start (exit 2)', async () => {
    const again = await cli(['tokens', 'rotate'], { CARD_TOKEN_KEYS: ROTATED });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^re-sealed 0 tokens under key test2/);
    const noKeys = await cli(['tokens', 'rotate'], { CARD_TOKEN_KEYS: '' });
    expect(noKeys.code).toBe(2);
    expect(noKeys.stderr).toContain('openssl rand -base64 32');
    const off = await cli(['tokens', 'rotate'], { CARD_TOKEN_ENCRYPTION: 'off' });
    expect(off.code).toBe(2);
    expect(off.stderr).toContain('CARD_TOKEN_ENCRYPTION is off');
  });
});

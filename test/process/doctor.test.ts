import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { doctorSummary } from '../../src/cli/doctor.js';
import { API_KEY, CARD_TOKEN_KEYS, testTokens, useScriptedApi } from '../support/fixtures.js';
import { adminQuery, useTestDatabase, withDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// `cards-sync doctor` as a user runs it: one line per check with the fix, exit 1 if any fails.

const database = useTestDatabase();
const upstream = useScriptedApi();

/** The last line a run's check lines call for: warnings counted when nothing failed. */
function summaryOf(stdout: string): string {
  const verdicts = stdout.split('\n').map((l) => /^(ok|WARN|FAIL)\s/.exec(l)?.[1]);
  const failed = verdicts.filter((v) => v === 'FAIL').length;
  const warned = verdicts.filter((v) => v === 'WARN').length;
  if (failed > 0) return `doctor: ${failed} check${failed === 1 ? '' : 's'} failed`;
  return warned === 0
    ? 'doctor: every check passed'
    : `doctor: passed, with ${warned} warning${warned === 1 ? '' : 's'}`;
}

const line = (stdout: string, name: string) =>
  stdout.split('\n').find((l) => new RegExp(`^(ok|WARN|FAIL)\\s+${name}\\s`).test(l)) ?? '';

describe('cards-sync doctor', () => {
  it('a healthy setup: every check ok (Redis persistence only warns), exit 0', async () => {
    const run = await runCli(['doctor'], {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
      SYNC_RATE_LIMIT_PER_SEC: '20',
    });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(line(run.stdout, 'config')).toMatch(
      /^ok\s+config\s+valid; one Redis node, queue prefix bull, 20 API requests\/s/,
    );
    expect(line(run.stdout, 'postgres')).toMatch(/^ok\s+postgres\s+Postgres at .+ answers \(PostgreSQL 15/);
    expect(line(run.stdout, 'migrations')).toMatch(/^ok\s+migrations\s+all \d+ applied/);
    expect(line(run.stdout, 'clock')).toMatch(/^ok\s+clock\s+within \d+ ms/);
    expect(line(run.stdout, 'redis')).toMatch(/^ok\s+redis\s+answers \(single\)/);
    expect(line(run.stdout, 'redis eviction')).toMatch(/^(ok|FAIL)\s+redis eviction/);
    // The machine's Redis keeps nothing on disk: a warning with the fix, not a failure.
    expect(line(run.stdout, 'redis persistence')).toMatch(/^(ok|WARN)\s+redis persistence/);
    expect(line(run.stdout, 'api key')).toMatch(
      /^ok\s+api key\s+accepted by 127\.0\.0\.1:\d+ \(HTTP (200|404)\)/,
    );
    expect(run.stdout.trim().split('\n').at(-1)).toBe(summaryOf(run.stdout));
    expect(run.stdout + run.stderr).not.toContain(API_KEY);
  });

  it('a pass with a warning says so: "passed, with 1 warning", not "every check passed"', async () => {
    // No API configured: the api key check warns, and nothing fails.
    const run = await runCli(['doctor'], {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      CARD_TOKEN_KEYS,
    });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(line(run.stdout, 'api key')).toMatch(/^WARN\s+api key/);
    const last = run.stdout.trim().split('\n').at(-1);
    expect(last).toMatch(/^doctor: passed, with \d+ warnings?$/);
    expect(last).toBe(summaryOf(run.stdout));
    expect(run.stdout).not.toContain('every check passed');
  });

  it('counts warnings with the plural right', () => {
    const ok = { verdict: 'ok' } as const;
    const warn = { verdict: 'WARN' } as const;
    const fail = { verdict: 'FAIL' } as const;
    expect(doctorSummary([ok, ok])).toBe('doctor: every check passed');
    expect(doctorSummary([ok, warn])).toBe('doctor: passed, with 1 warning');
    expect(doctorSummary([warn, ok, warn])).toBe('doctor: passed, with 2 warnings');
    expect(doctorSummary([warn, fail])).toBe('doctor: 1 check failed');
    expect(doctorSummary([fail, fail, ok])).toBe('doctor: 2 checks failed');
  });

  it('a broken setup: each failure named with its fix, the other checks still run, exit 1', async () => {
    const name = `cards_sync_doctor_${randomBytes(4).toString('hex')}`;
    await adminQuery(`create database ${name}`);
    try {
      const password = 'db-secret-4c1b';
      const url = withDatabase(inject('templateUrl'), name).replace('postgres@', `postgres:${password}@`);
      const run = await runCli(['doctor'], {
        DATABASE_URL: url,
        REDIS_URL: 'redis://127.0.0.1:1',
        CARDS_API_BASE_URL: upstream.url,
        CARDS_API_KEY: 'not-the-right-key-8f2e',
      });
      expect(run.code).toBe(1);
      expect(line(run.stdout, 'postgres')).toMatch(/^ok\s+postgres/);
      expect(line(run.stdout, 'migrations')).toMatch(
        /^FAIL\s+migrations\s+0 of \d+ applied; run `cards-sync migrate`/,
      );
      expect(line(run.stdout, 'redis')).toMatch(/^FAIL\s+redis\s+cannot reach Redis at 127\.0\.0\.1:1/);
      expect(line(run.stdout, 'api key')).toMatch(
        /^FAIL\s+api key\s+rejected \(HTTP 401\): fix CARDS_API_KEY/,
      );
      expect(run.stdout.trim().split('\n').at(-1)).toBe('doctor: 3 checks failed');
      expect(run.stdout + run.stderr).not.toContain(password);
      expect(run.stdout + run.stderr).not.toContain('not-the-right-key-8f2e');
    } finally {
      await adminQuery(`drop database if exists ${name} with (force)`);
    }
  });

  it('Postgres unreachable: the database checks fail with the fix, the others still run', async () => {
    const run = await runCli(['doctor'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/cards_sync',
      REDIS_URL: inject('redisUrl'),
    });
    expect(run.code).toBe(1);
    expect(line(run.stdout, 'postgres')).toMatch(
      /^FAIL\s+postgres\s+cannot reach Postgres at 127\.0\.0\.1:1\/cards_sync \(ECONNREFUSED\)/,
    );
    expect(line(run.stdout, 'redis')).toMatch(/^ok\s+redis/);
    expect(line(run.stdout, 'api key')).toMatch(/^WARN\s+api key\s+CARDS_API_BASE_URL and CARDS_API_KEY/);
    expect(line(run.stdout, 'card tokens')).toMatch(/^FAIL\s+card tokens\s+not checked/);
  });

  it('card tokens: ok when all are sealed under the first key; says what rotation has left, a lost key, and off', async () => {
    const env = { DATABASE_URL: database.url, REDIS_URL: inject('redisUrl') };
    const sealed = testTokens.store(990001, 'tok-doctor-1');
    await database.handle.pool.query(
      `insert into saved_cards (id, subscriber_id, card_token, card_token_fingerprint, bin_number, card_family,
         card_bank_code, card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
       values (990001, 99, $1, $2, '4761-xxxx-xxxx-0043', '', 1, 'AKBA', 1, now(), now(), now(), now()),
              (990002, 99, 'tok-doctor-plain', null, '4761-xxxx-xxxx-0043', '', 1, 'AKBA', 1, now(), now(), now(), now())`,
      [sealed.value, sealed.fingerprint],
    );
    try {
      const rotated = `test2:${Buffer.alloc(32, 9).toString('base64')},${CARD_TOKEN_KEYS}`;
      const older = await runCli(['doctor'], { ...env, CARD_TOKEN_KEYS: rotated });
      expect(line(older.stdout, 'card tokens')).toMatch(
        /^WARN\s+card tokens\s+sealing under key test2 \(ring test2, test1\); 1 tokens in plain text and 1 under older keys: run `cards-sync tokens rotate`/,
      );
      const lost = await runCli(['doctor'], {
        ...env,
        CARD_TOKEN_KEYS: `test2:${Buffer.alloc(32, 9).toString('base64')}`,
      });
      expect(lost.code).toBe(1);
      expect(line(lost.stdout, 'card tokens')).toMatch(
        /^FAIL\s+card tokens\s+1 tokens are sealed under key test1, which CARD_TOKEN_KEYS does not hold: add it back/,
      );
      const off = await runCli(['doctor'], { ...env, CARD_TOKEN_ENCRYPTION: 'off' });
      expect(line(off.stdout, 'card tokens')).toMatch(
        /^WARN\s+card tokens\s+CARD_TOKEN_ENCRYPTION=off: new tokens are stored as received \(1 in plain text now\)/,
      );
      const none = await runCli(['doctor'], env);
      expect(line(none.stdout, 'card tokens')).toMatch(
        /^FAIL\s+card tokens\s+CARD_TOKEN_KEYS is not set: generate a key with `openssl rand -base64 32`/,
      );
      await database.handle.pool.query('delete from saved_cards where id = 990002');
      const clean = await runCli(['doctor'], { ...env, CARD_TOKEN_KEYS });
      expect(line(clean.stdout, 'card tokens')).toMatch(
        /^ok\s+card tokens\s+every stored token sealed under key test1 \(ring test1\)/,
      );
      for (const r of [older, lost, off, none, clean])
        expect(r.stdout + r.stderr).not.toContain('tok-doctor');
    } finally {
      await database.handle.pool.query('delete from saved_cards where id in (990001, 990002)');
    }
  });
});

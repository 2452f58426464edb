import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { API_KEY, CARD_TOKEN_KEYS, useScriptedApi } from './fixtures.js';
import { adminQuery, useTestDatabase, withDatabase } from './helpers.js';
import { runCli } from './queue-helpers.js';

// `cards-sync doctor` as a user runs it: one line per check with the fix, exit 1 if any fails.

const database = useTestDatabase();
const upstream = useScriptedApi();

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
    expect(run.stdout.trim().split('\n').at(-1)).toBe('doctor: every check passed');
    expect(run.stdout + run.stderr).not.toContain(API_KEY);
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
  });
});

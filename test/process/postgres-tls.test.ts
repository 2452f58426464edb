import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../src/demo/local-servers.js';
import { makeCa, makeServerCert } from '../support/certificates.js';
import { API_KEY, CARD_TOKEN_KEYS, useScriptedApi } from '../support/fixtures.js';
import { runCli } from '../support/queue-helpers.js';

// Postgres reached over TLS with sslmode=verify-full and sslrootcert in DATABASE_URL: a private
// PostgreSQL 15 cluster with ssl=on (initdb and pg_ctl from the installed server), a throwaway CA
// made with openssl, and a pg_hba that refuses anything but TLS.

const BIN = '/usr/lib/postgresql/15/bin';
const available = existsSync(`${BIN}/initdb`) && spawnSync('openssl', ['version']).status === 0;
const upstream = useScriptedApi();

let dir = '';
let port = 0;
let caFile = '';
let otherCaFile = '';
const asRoot = process.getuid?.() === 0;

/** Runs a PostgreSQL binary as the postgres user when we are root (initdb refuses root). */
function pgBin(name: string, args: string[]) {
  const cmd = asRoot ? 'runuser' : `${BIN}/${name}`;
  const argv = asRoot ? ['-u', 'postgres', '--', `${BIN}/${name}`, ...args] : args;
  const r = spawnSync(cmd, argv, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${name} failed: ${r.stderr || r.stdout}`);
}

const url = (ca: string, mode = 'verify-full', host = 'localhost') =>
  `postgres://postgres@${host}:${port}/cards_sync_tls?sslmode=${mode}&sslrootcert=${ca}`;

beforeAll(async () => {
  if (!available) return;
  dir = mkdtempSync(join(tmpdir(), 'cards-sync-pgtls-'));
  chmodSync(dir, 0o755);
  // A CA, a server certificate for localhost (only) signed by it, and a second CA that signed nothing.
  caFile = makeCa(dir, 'ca', 'cards-sync test CA');
  otherCaFile = makeCa(dir, 'other', 'other CA');
  makeServerCert(dir, 'ca', 'DNS:localhost');
  chmodSync(join(dir, 'server.key'), 0o600);
  if (asRoot) {
    const { uid, gid } = {
      uid: Number(spawnSync('id', ['-u', 'postgres']).stdout),
      gid: Number(spawnSync('id', ['-g', 'postgres']).stdout),
    };
    for (const f of ['server.key', 'server.crt']) chownSync(join(dir, f), uid, gid);
    chownSync(dir, uid, gid);
  }
  pgBin('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  // TLS or nothing: a plain connection is rejected, so a passing test proves TLS was used.
  writeFileSync(
    join(dir, 'data', 'pg_hba.conf'),
    'local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n',
  );
  port = await freePort();
  const opts = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses='127.0.0.1'",
    '-c ssl=on',
    `-c ssl_cert_file=${join(dir, 'server.crt')}`,
    `-c ssl_key_file=${join(dir, 'server.key')}`,
    '-c fsync=off',
  ].join(' ');
  pgBin('pg_ctl', ['-D', join(dir, 'data'), '-o', opts, '-l', join(dir, 'log'), '-w', 'start']);
}, 60_000);

afterAll(() => {
  if (!dir) return;
  try {
    pgBin('pg_ctl', ['-D', join(dir, 'data'), '-m', 'immediate', 'stop']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe.skipIf(!available)('Postgres over TLS (sslmode=verify-full)', () => {
  it('migrate and sync work through a verified TLS connection; the session is encrypted', async () => {
    const env = {
      DATABASE_URL: url(caFile),
      REDIS_URL: inject('redisUrl'),
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
    };
    const migrated = await runCli(['migrate'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toContain('created the database');
    const synced = await runCli(['sync', '--id', '42'], env);
    expect(synced.code, synced.stderr).toBe(0);
    expect(synced.stdout).toMatch(/^succeeded {2}subscriber 42/);

    const client = new pg.Client({ connectionString: url(caFile) });
    await client.connect();
    try {
      const ssl = await client.query('select ssl, version from pg_stat_ssl where pid = pg_backend_pid()');
      expect(ssl.rows[0]).toMatchObject({ ssl: true });
      const cards = await client.query('select count(*)::int as n from saved_cards where subscriber_id = 42');
      expect(cards.rows[0].n).toBeGreaterThan(0);
    } finally {
      await client.end();
    }
  });

  it('refuses a server whose certificate another CA signed, and a plain connection: exit 1, saying why', async () => {
    const wrongCa = await runCli(['migrate'], { DATABASE_URL: url(otherCaFile) });
    expect(wrongCa.code).toBe(1);
    expect(wrongCa.stderr).toMatch(/certificate/i);
    const plain = await runCli(['migrate'], {
      DATABASE_URL: `postgres://postgres@localhost:${port}/cards_sync_tls?sslmode=disable`,
    });
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/pg_hba|no encryption|reject/i);
  });

  it('refuses a host name the certificate does not name (127.0.0.1 instead of localhost)', async () => {
    const run = await runCli(['migrate'], { DATABASE_URL: url(caFile, 'verify-full', '127.0.0.1') });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/altnames|does not match|IP: 127\.0\.0\.1/i);
  });
});

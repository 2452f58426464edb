import { describe, expect, it } from 'vitest';
import { changeEventsOf } from '../../src/events/in-effect.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// CHANGE_EVENTS=off|on (docs/events.md, docs/configuration.md): off, the default, writes no event;
// the commands an operator reaches for when events are expected say why there are none.

const database = useTestDatabase();
const upstream = useScriptedApi();

const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: database.url,
  CARDS_API_BASE_URL: upstream.url,
  CARDS_API_KEY: API_KEY,
  CARD_TOKEN_KEYS,
  WEBHOOK_ALLOW_PRIVATE: 'true',
  ...extra,
});

const count = async (sql: string, values: unknown[] = []) =>
  Number((await database.handle.pool.query<{ n: string }>(sql, values)).rows[0]!.n);

/** A live worker in the registry that publishes these settings, as a running worker would. */
async function liveWorker(id: string, settings: Record<string, unknown>): Promise<void> {
  await database.handle.pool.query(
    `insert into fleet_processes (id, role, host, pid, version, known_migration, key_ids, concurrency, settings)
      values ($1, 'worker', 'test-host', 4242, '0.1.0', '0028_tracing_span_context', '{}', 16, $2)`,
    [id, JSON.stringify(settings)],
  );
}
const leave = () => database.handle.pool.query('delete from fleet_processes');

describe('CHANGE_EVENTS', () => {
  it('off by default: a first sync stores its cards and writes no event; on: one event per card', async () => {
    upstream.script.set('id:5101', ok([makeCard(5101), makeCard(5101)]));
    const off = await runCli(['sync', '--id', '5101'], env());
    expect(off.code, off.stderr).toBe(0);
    expect(await count('select count(*) as n from saved_cards where subscriber_id = 5101')).toBe(2);
    expect(await count('select count(*) as n from change_events')).toBe(0);

    upstream.script.set('id:5102', ok([makeCard(5102), makeCard(5102)]));
    const on = await runCli(['sync', '--id', '5102'], env({ CHANGE_EVENTS: 'on' }));
    expect(on.code, on.stderr).toBe(0);
    expect(
      await count(
        "select count(*) as n from change_events where subscriber_id = 5102 and type = 'card.added'",
      ),
    ).toBe(2);
    expect(await count('select count(*) as n from change_events where subscriber_id = 5101')).toBe(0);
  });

  it('a bad value stops the command with the variable named, exit 2, and writes nothing', async () => {
    const run = await runCli(['sync', '--id', '5103'], env({ CHANGE_EVENTS: 'yes' }));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/CHANGE_EVENTS.*on or off/);
    expect(await count('select count(*) as n from sync_runs where subscriber_id = 5103')).toBe(0);
  });

  it('is read from the live workers: an older release that publishes none writes events', () => {
    expect(changeEventsOf([], 'off')).toMatchObject({ state: 'off', from: 'own' });
    expect(changeEventsOf([], 'on')).toMatchObject({ state: 'on', from: 'own' });
    const worker = (CHANGE_EVENTS?: string) => ({
      role: 'worker',
      settings: CHANGE_EVENTS === undefined ? {} : { CHANGE_EVENTS },
    });
    // The caller's own setting does not count once workers are live: they write, it does not.
    expect(changeEventsOf([worker('on'), worker('on')], 'off')).toMatchObject({
      state: 'on',
      from: 'workers',
    });
    expect(changeEventsOf([worker('off')], 'on').says).toBe('off on the 1 live worker');
    expect(changeEventsOf([worker('off'), worker()], 'off').state).toBe('mixed');
    expect(changeEventsOf([{ role: 'admin', settings: { CHANGE_EVENTS: 'on' } }], 'off').state).toBe('off');
  });

  it('webhooks add warns when no worker writes events, and not when they do', async () => {
    const off = await runCli(['webhooks', 'add', 'http://127.0.0.1:9/hook'], env());
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toMatch(/webhook endpoint \d+ added/);
    expect(off.stderr).toContain(
      'warning: change events are off in this configuration (no worker is live): this endpoint receives nothing',
    );
    expect(off.stderr).toContain('set CHANGE_EVENTS=on on every worker');

    await liveWorker('w-on', { CHANGE_EVENTS: 'on' });
    try {
      const on = await runCli(['webhooks', 'add', 'http://127.0.0.1:9/other'], env());
      expect(on.code, on.stderr).toBe(0);
      expect(on.stderr).not.toContain('warning');
    } finally {
      await leave();
    }
  });

  it('changes says why the feed is empty when the workers write no events', async () => {
    // After the events the first case wrote: nothing more is to come while the workers write none.
    const { rows } = await database.handle.pool.query<{ cursor: string }>(
      `select txid::text || '-' || seq::text as cursor from change_events order by txid desc, seq desc limit 1`,
    );
    await liveWorker('w-off', { CHANGE_EVENTS: 'off' });
    try {
      const run = await runCli(['changes', '--after', rows[0]!.cursor], env({ CHANGE_EVENTS: 'on' }));
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(
        'changes: no events; change events are off on the 1 live worker: syncs write no events',
      );
    } finally {
      await leave();
    }
    await liveWorker('w-on', { CHANGE_EVENTS: 'on' });
    try {
      const run = await runCli(['changes', '--after', '0-0'], env());
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toContain('change events are');
    } finally {
      await leave();
    }
  });

  it('doctor warns when endpoints wait for events that are not written', async () => {
    // Two endpoints were added above; no worker is live and this configuration has events off.
    const off = await runCli(['doctor'], env());
    expect(off.stdout).toMatch(
      /WARN\s+change events\s+off in this configuration \(no worker is live\), yet 2 enabled webhook endpoints wait for events that are not written; set CHANGE_EVENTS=on on every worker/,
    );
    const on = await runCli(['doctor'], env({ CHANGE_EVENTS: 'on' }));
    expect(on.stdout).toMatch(
      /ok\s+change events\s+on in this configuration \(no worker is live\); 2 enabled/,
    );
  });
});

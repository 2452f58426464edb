import { eq } from 'drizzle-orm';
import { beforeEach, describe, expect, it } from 'vitest';
import { adminActions } from '../../db/schema/index.js';
import { CSRF, READ_TOKEN, useAdminApp } from '../support/admin-client.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { emit } from '../support/webhook-events.js';
import {
  DESCRIPTION,
  deliveriesOf,
  EXCERPT,
  QUERY_TOKEN,
  type SeededEndpoint,
  seedWebhookEndpoint,
} from '../support/webhook-page-fixture.js';

// The ops page's webhooks view through app.fetch: what it shows (and never shows), and the replay
// form behind the token, the CSRF and origin checks, with its audit row.

const database = useTestDatabase();
const { get, post } = useAdminApp(database);
const pool = () => database.handle.pool;

let seeded: SeededEndpoint;
let subscriber = 7000;
beforeEach(async () => {
  seeded = await seedWebhookEndpoint(pool(), ++subscriber);
});

const replayPath = () => `/admin/webhooks/${seeded.id}/replay`;
const since = () => new Date(Date.now() - 3_600_000).toISOString();
const replayAudits = async () =>
  (
    await database.handle.db.select().from(adminActions).where(eq(adminActions.action, 'webhooks_replay'))
  ).filter((a) => (a.detail as { endpoint?: number }).endpoint === seeded.id);
const unchanged = async () => {
  expect(await deliveriesOf(pool(), seeded.id)).toEqual([
    { eventId: seeded.events[0], status: 'dead', replay: false },
    { eventId: seeded.events[1], status: 'dead', replay: false },
    { eventId: seeded.events[2], status: 'pending', replay: false },
  ]);
  expect(await replayAudits()).toEqual([]);
};

describe('the webhooks view', () => {
  it('shows each endpoint, its state, lag, dead letters, latest deliveries, escaped, with no secret', async () => {
    const res = await get('/admin/webhooks');
    expect(res.status).toBe(200);
    const html = await res.text();
    const section = html.slice(html.indexOf(`id="endpoint-${seeded.id}"`));
    expect(section).toContain('<dd class="url">http://127.0.0.1:9/hook</dd>');
    expect(html).not.toContain(QUERY_TOKEN);
    expect(html).not.toContain(seeded.secret);
    expect(html).not.toContain(seeded.secret.replace(/^whsec_/, ''));
    expect(html).not.toContain(DESCRIPTION);
    expect(section).toContain('CRM &lt;b&gt;hook&lt;/b&gt; &quot;fraud&quot; &amp; co');
    expect(html).not.toContain(EXCERPT);
    expect(section).toContain('&lt;script&gt;alert(1)&lt;/script&gt; upstream broke');
    expect(section).toMatch(/<dd class="state"><span class="alert">FAILING<\/span> since/);
    expect(section).toMatch(/<dd class="dead-letters">2<\/dd>/);
    expect(section).toMatch(/<dd class="pending"[^>]*>1<\/dd>/);
    expect(section).not.toContain('near-retention');
    expect(section).toMatch(/<dd class="lag" [^>]*>\d+ s<\/dd>/);
    for (const event of seeded.events) expect(section).toContain(event);
    const dead = section.slice(section.indexOf(`id="dead-${seeded.id}"`));
    expect(dead.match(/data-status="dead"/g)).toHaveLength(2);
    expect(dead).toContain('<td>500</td><td class="nowrap">42 ms</td>');
    // The operator's form, prefilled to start just before the oldest dead letter.
    expect(section).toContain(`action="/admin/webhooks/${seeded.id}/replay"`);
    expect(section).toContain(`name="_csrf" value="${CSRF}"`);
    expect(section).toMatch(/name="since" value="\d{4}-\d\d-\d\dT[\d:.]+Z"/);
    // A replay carries the events' own ids (docs/webhooks.md), and the page says so.
    expect(section).toContain("each with the event's own id as its webhook-id, the same as before");
    expect(section).not.toContain('its own webhook-id');
  });

  it('shows a disabled endpoint with its reason', async () => {
    await pool().query(
      "update webhook_endpoints set enabled = false, disabled_reason = 'gone <b>410</b>' where id = $1",
      [seeded.id],
    );
    const html = await (await get('/admin/webhooks')).text();
    expect(html).toContain('<span class="alert">disabled</span>: gone &lt;b&gt;410&lt;/b&gt;');
  });

  it('counts what waits for a disabled endpoint, and says in red when its oldest waiting event nears the retention', async () => {
    await pool().query(
      "update webhook_endpoints set enabled = false, disabled_reason = 'by an operator' where id = $1",
      [seeded.id],
    );
    const [old] = await emit(pool(), subscriber, 3);
    // 25 days old: past 80% of the default retention of 30 days.
    await pool().query(
      "update change_events set created_at = created_at - interval '25 days' where 'evt_' || id::text = $1",
      [old],
    );
    const html = await (await get('/admin/webhooks')).text();
    const section = html.slice(html.indexOf(`id="endpoint-${seeded.id}"`));
    // Its pending delivery, and the three events it has not taken while disabled.
    expect(section).toMatch(/<dd class="pending"[^>]*>4<\/dd>/);
    const lag = Number(/<dd class="lag" [^>]*>(\d+) s<\/dd>/.exec(section)?.[1]);
    expect(lag).toBeGreaterThanOrEqual(25 * 86_400);
    expect(section).toContain(
      `<p class="alert near-retention" id="near-retention-${seeded.id}">EVENTS NEAR RETENTION: its oldest waiting event is 25.0 days old, and events older than 30 days (CHANGE_EVENTS_RETENTION_DAYS) are dropped unseen; enable it before then (cards-sync webhooks enable ${seeded.id}), or remove it if nobody wants them (cards-sync webhooks remove ${seeded.id})</p>`,
    );
  });

  it('the reader sees the page without a form or the CSRF value', async () => {
    const res = await get('/admin/webhooks', { token: READ_TOKEN });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain(`id="endpoint-${seeded.id}"`);
    expect(html).toContain('you may look but not replay');
    expect(html).not.toContain('<form class="replay-form"');
    expect(html).not.toContain(CSRF);
  });

  it('is linked from the overview', async () => {
    expect(await (await get('/admin')).text()).toContain('<a id="webhooks-link" href="/admin/webhooks">');
  });
});

describe('the replay form', () => {
  it('re-queues the dead letters for the operator, redirects to a flash and writes an audit row', async () => {
    const html = await (await get('/admin/webhooks')).text();
    const prefilled = /name="since" value="([^"]+)"/.exec(
      html.slice(html.indexOf(`id="endpoint-${seeded.id}"`)),
    )![1]!;
    const res = await post(replayPath(), { since: prefilled });
    expect(res.status).toBe(303);
    // From a second before the oldest dead letter: earlier tests' events of that second come too
    // (the endpoint takes every type), as with `webhooks replay --since`.
    const location = res.headers.get('location')!;
    const replayed = Number(/&replayed=(\d+)#/.exec(location)![1]);
    expect(replayed).toBeGreaterThanOrEqual(2);
    expect(location).toBe(
      `/admin/webhooks?done=replayed&endpoint=${seeded.id}&replayed=${replayed}#endpoint-${seeded.id}`,
    );
    // The dead letters are queued again as replays; the still-pending event is not doubled.
    const own = (await deliveriesOf(pool(), seeded.id)).filter((d) => seeded.events.includes(d.eventId));
    expect(own).toEqual([
      { eventId: seeded.events[0], status: 'dead', replay: false },
      { eventId: seeded.events[1], status: 'dead', replay: false },
      { eventId: seeded.events[2], status: 'pending', replay: false },
      { eventId: seeded.events[0], status: 'pending', replay: true },
      { eventId: seeded.events[1], status: 'pending', replay: true },
    ]);
    const audits = await replayAudits();
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ actor: 'operator', source: 'http' });
    expect(audits[0]!.detail).toMatchObject({
      endpoint: seeded.id,
      replayed,
      route: 'POST /admin/webhooks/:id/replay',
    });
    const after = await (await get(res.headers.get('location')!.split('#')[0]!)).text();
    expect(after).toContain(`Endpoint ${seeded.id}: ${replayed} events queued again (replay).`);
    expect(after).toContain('pending (replay)');
  });

  it('"Retry now" makes what waits out its backoff due at once, redirects to a flash and writes an audit row', async () => {
    // The pending delivery waits out a backoff of a minute and a half (a receiver that was down).
    await pool().query(
      `update webhook_deliveries set next_attempt_at = now() + interval '95 seconds'
        where endpoint_id = $1 and status = 'pending'`,
      [seeded.id],
    );
    const html = await (await get('/admin/webhooks')).text();
    expect(html.slice(html.indexOf(`id="endpoint-${seeded.id}"`))).toContain(
      `action="/admin/webhooks/${seeded.id}/retry"`,
    );
    const res = await post(`/admin/webhooks/${seeded.id}/retry`, {});
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(
      `/admin/webhooks?done=retried&endpoint=${seeded.id}&retried=1#endpoint-${seeded.id}`,
    );
    const { rows } = await pool().query<{ waiting: number }>(
      `select count(*)::int as waiting from webhook_deliveries
        where endpoint_id = $1 and status = 'pending' and next_attempt_at > now()`,
      [seeded.id],
    );
    expect(rows[0]!.waiting).toBe(0);
    const audits = (
      await database.handle.db.select().from(adminActions).where(eq(adminActions.action, 'webhooks_retry'))
    ).filter((a) => (a.detail as { endpoint?: number }).endpoint === seeded.id);
    expect(audits.map((a) => a.detail)).toEqual([
      { endpoint: seeded.id, retried: 1, route: 'POST /admin/webhooks/:id/retry' },
    ]);
    const after = await (await get(res.headers.get('location')!.split('#')[0]!)).text();
    expect(after).toContain(`Endpoint ${seeded.id}: 1 delivery waiting out a backoff due now.`);
    // The reader may not.
    expect((await post(`/admin/webhooks/${seeded.id}/retry`, {}, { token: READ_TOKEN })).status).toBe(403);
  });

  it('takes a feed cursor too', async () => {
    const res = await post(replayPath(), { since: '0-0' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toMatch(/&replayed=\d+#/);
    const replays = (await deliveriesOf(pool(), seeded.id)).filter((d) => d.replay).map((d) => d.eventId);
    expect(replays).toEqual(expect.arrayContaining(seeded.dead));
    expect(replays).not.toContain(seeded.events[2]);
  });

  it('refuses a missing or wrong _csrf, a foreign origin, another encoding, and the read token', async () => {
    const fields = { since: since() };
    const refusals: [string, Response, number][] = [
      ['no _csrf', await post(replayPath(), fields, { csrf: null }), 403],
      ['a wrong _csrf', await post(replayPath(), fields, { csrf: `${CSRF.slice(0, -2)}xx` }), 403],
      ['the token as _csrf', await post(replayPath(), fields, { csrf: ADMIN_TOKEN }), 403],
      [
        'a foreign Origin',
        await post(replayPath(), fields, { headers: { origin: 'https://evil.example' } }),
        403,
      ],
      [
        'Sec-Fetch-Site cross-site',
        await post(replayPath(), fields, { headers: { 'sec-fetch-site': 'cross-site' } }),
        403,
      ],
      ['JSON', await post(replayPath(), fields, { contentType: 'application/json' }), 415],
      ['the read token', await post(replayPath(), fields, { token: READ_TOKEN }), 403],
      [
        'the read token, read-only app',
        await post(replayPath(), fields, { token: READ_TOKEN, app: 'read-only' }),
        403,
      ],
      ['no token', await post(replayPath(), fields, { token: null }), 401],
    ];
    for (const [what, res, status] of refusals) {
      expect(res.status, what).toBe(status);
      expect(await res.text(), what).not.toContain(ADMIN_TOKEN);
    }
    await unchanged();
  });

  it('answers a bad endpoint id 400, an unknown one 404 and a bad since 400, each saying why', async () => {
    const cases: [string, Record<string, string>, number, RegExp][] = [
      ['/admin/webhooks/abc/replay', { since: since() }, 400, /an endpoint id is a whole number/],
      ['/admin/webhooks/0/replay', { since: since() }, 400, /an endpoint id is a whole number/],
      ['/admin/webhooks/99999/replay', { since: since() }, 404, /there is no webhook endpoint 99999/],
      [
        replayPath(),
        { since: 'yesterday' },
        400,
        /since takes a change-feed cursor .* not &quot;yesterday&quot;/,
      ],
      [replayPath(), {}, 400, /since takes a change-feed cursor/],
      [replayPath(), { since: '<script>x</script>' }, 400, /not &quot;&lt;script&gt;/],
    ];
    for (const [path, fields, status, message] of cases) {
      const res = await post(path, fields);
      expect(res.status, path).toBe(status);
      const html = await res.text();
      expect(html, path).toMatch(message);
      expect(html, path).toContain('Nothing was done');
    }
    await unchanged();
  });
});

describe('the remove button', () => {
  const removePath = () => `/admin/webhooks/${seeded.id}/remove`;
  const removeAudits = async () =>
    (
      await database.handle.db.select().from(adminActions).where(eq(adminActions.action, 'webhooks_remove'))
    ).filter((a) => (a.detail as { endpoint?: number }).endpoint === seeded.id);
  const stillThere = async () => {
    const { rows } = await pool().query('select removed_at from webhook_endpoints where id = $1', [
      seeded.id,
    ]);
    expect(rows[0].removed_at).toBeNull();
    expect(await removeAudits()).toEqual([]);
  };

  it("is the operator's, with a confirmation that says what will not be sent", async () => {
    const html = await (await get('/admin/webhooks')).text();
    const section = html.slice(html.indexOf(`id="endpoint-${seeded.id}"`));
    expect(section).toContain(
      `<form class="remove-form" id="remove-${seeded.id}" method="post" action="${removePath()}">`,
    );
    expect(section).toContain(
      `<input type="checkbox" name="confirm" value="yes" required> Remove endpoint ${seeded.id}: 1 event (the oldest`,
    );
    expect(section).toContain('waiting for it will not be sent</label>');
    const reader = await (await get('/admin/webhooks', { token: READ_TOKEN })).text();
    expect(reader).not.toContain('class="remove-form"');
  });

  it('removes it for the operator: says what waited, writes an audit row without secret or query, keeps its deliveries', async () => {
    const res = await post(removePath(), { confirm: 'yes' });
    expect(res.status).toBe(303);
    const location = res.headers.get('location')!;
    expect(location).toMatch(
      new RegExp(`^/admin/webhooks\\?done=removed&endpoint=${seeded.id}&pending=1&capped=0&lag=\\d+$`),
    );
    const audits = await removeAudits();
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ actor: 'operator', source: 'http' });
    expect(audits[0]!.detail).toEqual({
      endpoint: seeded.id,
      url: 'http://127.0.0.1:9/hook',
      pending: 1,
      pendingCapped: false,
      lagSeconds: expect.any(Number),
      route: 'POST /admin/webhooks/:id/remove',
    });
    expect(JSON.stringify(audits)).not.toContain(QUERY_TOKEN);
    expect(JSON.stringify(audits)).not.toContain(seeded.secret.replace(/^whsec_/, ''));
    const after = await (await get(location)).text();
    expect(after).toMatch(
      new RegExp(
        `<p id="flash" class="flash done" data-done="removed">Endpoint ${seeded.id} removed: 1 event \\(the oldest \\d+ s old\\) still waited for it and will not be sent\\.`,
      ),
    );
    expect(after).not.toContain(`id="endpoint-${seeded.id}"`);
    // Its deliveries stay, readable by `webhooks deliveries`.
    expect(await deliveriesOf(pool(), seeded.id)).toHaveLength(3);
    // Twice: nothing more to remove.
    const again = await post(removePath(), { confirm: 'yes' });
    expect(again.status).toBe(404);
    expect(await again.text()).toContain(`webhook endpoint ${seeded.id} was removed already`);
    expect(await removeAudits()).toHaveLength(1);
  });

  it('refuses without the confirmation, a wrong _csrf, a foreign origin, the read token; an unknown id is 404', async () => {
    const yes = { confirm: 'yes' };
    const refusals: [string, Response, number][] = [
      ['not confirmed', await post(removePath(), {}), 400],
      ['no _csrf', await post(removePath(), yes, { csrf: null }), 403],
      ['a wrong _csrf', await post(removePath(), yes, { csrf: `${CSRF.slice(0, -2)}xx` }), 403],
      [
        'a foreign Origin',
        await post(removePath(), yes, { headers: { origin: 'https://evil.example' } }),
        403,
      ],
      ['JSON', await post(removePath(), yes, { contentType: 'application/json' }), 415],
      ['the read token', await post(removePath(), yes, { token: READ_TOKEN }), 403],
      ['no token', await post(removePath(), yes, { token: null }), 401],
      ['an unknown id', await post('/admin/webhooks/99999/remove', yes), 404],
      ['a bad id', await post('/admin/webhooks/abc/remove', yes), 400],
    ];
    for (const [what, res, status] of refusals) {
      expect(res.status, what).toBe(status);
      expect(await res.text(), what).not.toContain(ADMIN_TOKEN);
    }
    await stillThere();
  });
});

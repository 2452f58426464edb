import { describe, expect, it } from 'vitest';
import { refreshRuns } from '../../db/schema/index.js';
import { pauseProcessing } from '../../jobs/refresh/index.js';
import { readPauseReason } from '../../jobs/sync/index.js';
import { CSRF, useAdminApp } from '../support/admin-client.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// The ops page's guards and forms through app.fetch: every route behind the admin token, every
// form behind the CSRF checks, and pause and resume with a reason.

const database = useTestDatabase();
const { q, lines, get, post, nothingQueued } = useAdminApp(database);

const POSTS: [string, Record<string, string>][] = [
  ['/admin/subscribers/5001/resync', {}],
  ['/admin/resync-email', { email: 'someone@example.com' }],
  ['/admin/pause', { reason: 'maintenance' }],
  ['/admin/resume', {}],
];
const GETS = ['/admin/subscribers?q=5001', '/admin/subscribers/5001'];

describe('the ops routes are behind the admin token', () => {
  it('answer 401 without a token and 403 when ADMIN_TOKEN is unset, doing nothing', async () => {
    for (const path of GETS) {
      expect((await get(path, { token: null })).status, path).toBe(401);
      expect((await get(path, { app: 'off' })).status, path).toBe(403);
    }
    for (const [path, fields] of POSTS) {
      expect((await post(path, fields, { token: null })).status, path).toBe(401);
      expect((await post(path, fields, { token: 'wrong-token-wrong-token' })).status, path).toBe(401);
      expect((await post(path, fields, { app: 'off' })).status, path).toBe(403);
    }
    await nothingQueued();
    expect(await q.queue.isPaused()).toBe(false);
  });
});

describe('CSRF protection of the forms', () => {
  it.each(POSTS)(
    '%s refuses a missing or wrong _csrf, a foreign origin, another encoding',
    async (path, fields) => {
      await pauseProcessing({ syncQueue: q.queue, redis: q.redis }, 'held by the test');
      const refusals: [string, Response, number][] = [
        ['no _csrf', await post(path, fields, { csrf: null }), 403],
        ['a wrong _csrf', await post(path, fields, { csrf: `${CSRF.slice(0, -2)}xx` }), 403],
        ['the token as _csrf', await post(path, fields, { csrf: ADMIN_TOKEN }), 403],
        ['a foreign Origin', await post(path, fields, { headers: { origin: 'https://evil.example' } }), 403],
        ['Origin null', await post(path, fields, { headers: { origin: 'null' } }), 403],
        [
          'Sec-Fetch-Site cross-site',
          await post(path, fields, { headers: { 'sec-fetch-site': 'cross-site' } }),
          403,
        ],
        ['JSON', await post(path, fields, { contentType: 'application/json' }), 415],
        ['multipart', await post(path, fields, { contentType: 'multipart/form-data; boundary=x' }), 415],
      ];
      for (const [what, res, status] of refusals) {
        expect(res.status, what).toBe(status);
        const html = await res.text();
        expect(html, what).toContain('Nothing was done');
        expect(html, what).not.toContain(ADMIN_TOKEN);
      }
      await nothingQueued();
      // Still paused by the test, with its reason: neither pause nor resume went through.
      expect(await q.queue.isPaused()).toBe(true);
      expect((await readPauseReason(q.queue, q.redis))?.reason).toBe('held by the test');
      await post('/admin/resume');
      expect(await q.queue.isPaused()).toBe(false);
    },
  );
});

describe('pause and resume from the overview', () => {
  it('refuses a reason that is empty, too long or has control characters', async () => {
    for (const reason of ['', '   ', 'x'.repeat(501), 'line one\nline two', 'bell\u0007']) {
      const res = await post('/admin/pause', { reason });
      expect(res.status, JSON.stringify(reason)).toBe(400);
      expect(await res.text()).toContain('Not paused');
    }
    expect(await q.queue.isPaused()).toBe(false);
  });

  it('pauses with a reason; a second pause replaces the reason shown and keeps the first listed; resume says what it did', async () => {
    const overview = await (await get('/admin')).text();
    expect(overview).toContain('<form id="pause-form" method="post" action="/admin/pause">');
    expect(overview).toContain('action="/admin/subscribers"');

    const paused = await post('/admin/pause', { reason: '  upstream maintenance <b>until 6</b>  ' });
    expect(paused.status).toBe(303);
    expect(paused.headers.get('location')).toBe('/admin?done=paused');
    const html = await (await get('/admin?done=paused')).text();
    expect(html).toContain('id="queue-state">PAUSED');
    expect(html).toContain('upstream maintenance &lt;b&gt;until 6&lt;/b&gt;');
    expect(html).not.toContain('<b>until 6</b>');
    expect(html).toContain('Paused: workers finish their current jobs');
    expect(html).toContain('<form id="resume-form"');

    const second = await post('/admin/pause', { reason: 'another reason' });
    expect(second.headers.get('location')).toBe('/admin?done=already-paused');
    // The later reason is the pause's reason now; the first is kept, listed under it.
    expect((await readPauseReason(q.queue, q.redis))?.reason).toBe('another reason');
    const already = await (await get('/admin?done=already-paused')).text();
    expect(already).toMatch(
      /already paused by operator at <time [^>]*>[^<]*Z<\/time>; its reason is now: another reason\./,
    );
    expect(already).toMatch(/id="pause-reason">\(operator at <time [^>]*>[^<]*<\/time>: another reason\)/);
    expect(already).toMatch(
      /<ul id="pause-details">.*<li>earlier reason \(operator at [^)]*\): upstream maintenance &lt;b&gt;until 6&lt;\/b&gt;<\/li>/,
    );
    expect(already).toMatch(
      /<tr data-action="pause"[^>]*>(?:(?!<\/tr>).)*reason=&quot;another reason&quot;(?:(?!<\/tr>).)*alreadyPaused=true/,
    );

    const resumed = await post('/admin/resume');
    expect(resumed.headers.get('location')).toBe('/admin?done=resumed');
    expect(await q.queue.isPaused()).toBe(false);
    const after = await (await get('/admin?done=resumed')).text();
    expect(after).toContain('id="queue-state">running');
    expect(after).toContain('Resumed: workers take jobs again. No halted refresh run to continue.');
    const idle = await post('/admin/resume');
    expect(idle.headers.get('location')).toBe('/admin?done=not-paused');
    // Free text in the query is never shown: only known flashes are.
    const forged = await (await get('/admin?done=%3Cscript%3Ealert(1)%3C/script%3E')).text();
    expect(forged).not.toContain('id="flash"');
    expect(forged).not.toContain('alert(1)');
  });

  it('resume continues a refresh run the breaker halted, and says which', async () => {
    const [run] = await database.handle.db
      .insert(refreshRuns)
      .values({ trigger: 'nightly', status: 'halted', startedAt: new Date(), haltedReason: 'too many wipes' })
      .returning({ id: refreshRuns.id });
    await pauseProcessing({ syncQueue: q.queue, redis: q.redis }, 'breaker stand-in');
    const res = await post('/admin/resume');
    expect(res.headers.get('location')).toBe(`/admin?done=resumed&run=${run!.id}`);
    const html = await (await get(res.headers.get('location')!)).text();
    expect(html).toContain(`Refresh run ${run!.id} continues from where the breaker halted it.`);
    expect(lines.join('\n')).not.toContain(ADMIN_TOKEN);
  });
});

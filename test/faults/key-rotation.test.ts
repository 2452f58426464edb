import { expect, it } from 'vitest';
import { liveFleet } from '../../src/fleet/registry.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { cardTokens } from '../../src/tokens/card-tokens.js';
import { parseKeyRing } from '../../src/tokens/keyring.js';
import { API_KEY, CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, runCli, waitFor } from '../support/queue-helpers.js';
import { recordFaultRow } from './report.js';
import { startScenario } from './scenario.js';
import { secretsIn } from './secrets.js';

// Key rotation with the fleet running: `tokens rotate` is refused while a live worker
// lacks the new key, and goes through once the workers have restarted with it. Workers sync under
// load the whole time; none fails a sync for a key it cannot open.

const database = useTestDatabase();
const cleanups = useCleanups();
const NEW_KEY = `test2:${Buffer.alloc(32, 7).toString('base64')}`;

it('key rotation: refused while a worker lacks the key, done after the workers restart with it; no sync fails', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: 4000,
    firstId: 7_200_000,
    apiArgs: ['--latency-ms', '3'],
    env: { SYNC_RATE_LIMIT_PER_SEC: '500' },
  });
  const worker = (ring: string): CliProcess =>
    s.start(['worker', '--concurrency', '8'], { CARD_TOKEN_KEYS: ring });
  const pool = database.handle.pool;
  const synced = async () =>
    (
      await pool.query<{ n: number }>(
        'select count(*)::int as n from subscribers where last_success_at is not null',
      )
    ).rows[0]!.n;
  const holding = async (key: string) => (await liveFleet(pool)).filter((p) => p.keyIds.includes(key)).length;
  const roll = async (workers: CliProcess[], ring: string) => {
    for (let i = 0; i < workers.length; i++) {
      workers[i]!.process.kill('SIGTERM');
      expect((await workers[i]!.done).code).toBe(0);
      workers[i] = worker(ring);
    }
  };

  const workers = [worker(CARD_TOKEN_KEYS), worker(CARD_TOKEN_KEYS)];
  await waitFor('the workers under way', async () => (await synced()) >= 800, 60_000);
  const rotateEnv = { ...s.env, CARD_TOKEN_KEYS: `${NEW_KEY},${CARD_TOKEN_KEYS}` };
  const refused = await runCli(['tokens', 'rotate'], rotateEnv);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(
    'tokens rotate would seal under key test2, which 2 live workers do not hold',
  );

  // Step one: every worker gets the new key, second (it can open what the new key seals). Step
  // two: the new key first (new tokens are sealed under it). Step three: rotate the rest.
  await roll(workers, `${CARD_TOKEN_KEYS},${NEW_KEY}`);
  await waitFor('the ring rolled', async () => (await holding('test2')) === 2, 30_000);
  await roll(workers, `${NEW_KEY},${CARD_TOKEN_KEYS}`);
  const rotated = await runCli(['tokens', 'rotate'], rotateEnv);
  expect(rotated.code, rotated.stderr).toBe(0);

  await s.drained(240_000, workers);
  for (const w of workers) w.process.kill('SIGTERM');
  for (const w of workers) expect((await w.done).code).toBe(0);
  expect(await s.queue.getJobCounts('failed')).toEqual({ failed: 0 });
  // No sync failed for a key it could not open (attempts cut short by a rolling restart are retried).
  const keyFailures = await pool.query<{ n: number }>(
    `select count(*)::int as n from sync_runs where error_code = 'token_key_unknown'`,
  );
  expect(keyFailures.rows[0]!.n).toBe(0);
  const outcomes = await pool.query<{ status: string; error_code: string | null; n: number }>(
    'select status, error_code, count(*)::int as n from sync_runs group by 1, 2 order by 3 desc',
  );
  console.error(`key rotation: sync outcomes ${JSON.stringify(outcomes.rows)}`);
  // Every token sealed under the new key, and each opens to what the API served.
  const ring = cardTokens(true, parseKeyRing(`${NEW_KEY},${CARD_TOKEN_KEYS}`));
  const rows = await pool.query<{
    id: number;
    subscriber_id: number;
    card_token: string;
    card_token_fingerprint: string;
  }>(
    'select id, subscriber_id, card_token, card_token_fingerprint from saved_cards where removed_at is null',
  );
  const served = new Map(s.ids.flatMap((id) => cardsFor(id).map((c) => [c.id, c.cardToken] as const)));
  let wrong = 0;
  for (const r of rows.rows) {
    const key = r.card_token.split(':')[1];
    const token = ring.reveal(r.id, { value: r.card_token, fingerprint: r.card_token_fingerprint });
    if (key !== 'test2' || token !== served.get(r.id)) wrong++;
  }
  expect(rows.rows.length).toBe(served.size);
  expect(wrong).toBe(0);
  recordFaultRow({
    scenario: 'key rotation',
    faults: 'tokens rotate refused, workers rolled onto the new key, rotated, rolled again',
    faultCount: 1,
    jobs: s.ids.length,
    subscribersChecked: s.ids.length,
    lost: served.size - rows.rows.length + wrong,
    duplicated: 0,
  });
  expect(secretsIn(s.logs, { apiKey: API_KEY, cardTokens: new Set(served.values()) })).toEqual([]);
}, 300_000);

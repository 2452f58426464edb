import { expect, it } from 'vitest';
import { createMockApi, type MockReply } from '../../src/mock-api/server.js';
import { API_KEY } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { startScenario } from './scenario.js';

// Two 429 storms while two worker processes sync: for five seconds every request is answered 429,
// with `Retry-After: 2` in the first storm and an HTTP date two to three seconds ahead in the
// second. The API runs in this process so that every request's arrival time is seen: after each
// 429, no request may reach the API until its Retry-After has passed, from either worker, apart
// from requests the workers had already started when the 429 was answered.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const STORM_MS = 5000;
/**
 * Requests already on their way when a 429 is answered: jobs that had started before the other
 * worker set the shared limit. Anything later than this inside a Retry-After window disobeys it.
 */
const IN_FLIGHT_MS = 300;

interface Storm {
  /** Starts with the request after this many successful answers. */
  after: number;
  form: 'seconds' | 'http-date';
  startedAt?: number;
}
/** One 429: answered at `at`, no request allowed before `until`. */
interface Window {
  at: number;
  until: number;
}

function stormApi(storms: Storm[]) {
  const windows: Window[] = [];
  let answered = 0;
  const mock = createMockApi({
    apiKey: API_KEY,
    latencyMs: 5,
    override: (): MockReply | undefined => {
      const now = Date.now();
      const storm = storms.find(
        (s) => answered >= s.after && (s.startedAt === undefined || now < s.startedAt + STORM_MS),
      );
      if (!storm) {
        answered++;
        return undefined;
      }
      storm.startedAt ??= now;
      let header: string;
      let until: number;
      if (storm.form === 'seconds') {
        header = '2';
        until = now + 2000;
      } else {
        // An HTTP date has whole seconds: the next whole second at least two seconds ahead.
        until = Math.ceil((now + 2000) / 1000) * 1000;
        header = new Date(until).toUTCString();
      }
      windows.push({ at: now, until });
      return {
        status: 429,
        body: { title: 'Too Many Requests', status: 429 },
        headers: { 'retry-after': header },
      };
    },
  });
  return { mock, windows };
}

it('429 storms: no worker sends a request before Retry-After has passed, and every subscriber ends right', async () => {
  const storms: Storm[] = [
    { after: Math.floor(SUBSCRIBERS * 0.3), form: 'seconds' },
    { after: Math.floor(SUBSCRIBERS * 0.6), form: 'http-date' },
  ];
  const { mock, windows } = stormApi(storms);
  const apiUrl = await mock.start();
  cleanups.push(() => mock.stop());
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 8_000_000,
    apiUrl,
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  await waitFor('both storms', async () => storms.every((st) => st.startedAt !== undefined), 120_000);
  await s.drained(240_000, workers);

  const lookups = mock.requests.filter((r) => r.path.startsWith('/api/')).map((r) => r.at);
  // A request inside a window, later than the in-flight allowance, went out while told to wait.
  const early = lookups.filter((at) => windows.some((w) => at >= w.at + IN_FLIGHT_MS && at < w.until));
  const lags = lookups.flatMap((at) => {
    const w = windows.find((w) => at > w.at && at < w.at + IN_FLIGHT_MS);
    return w ? [at - w.at] : [];
  });
  const stormTime = storms.length * STORM_MS;
  const inStorms = lookups.filter((at) =>
    storms.some((st) => at >= st.startedAt! && at < st.startedAt! + STORM_MS),
  ).length;
  const first = lookups[0]!;
  const last = lookups.at(-1)!;
  const outsideRate = (lookups.length - inStorms) / ((last - first - stormTime) / 1000);
  const stormRate = inStorms / (stormTime / 1000);
  const measured =
    `${windows.length} × 429 in 2 storms of ${STORM_MS / 1000} s (Retry-After 2 s, then an HTTP date); ` +
    `requests/s ${Math.round(outsideRate)} outside the storms, ${stormRate.toFixed(1)} in them; ` +
    `${early.length} sent inside a Retry-After window, ${lags.length} already in flight (arrived at most ${Math.max(0, ...lags)} ms after the 429)`;
  console.log(measured);

  // Each storm answered several 429s (the workers came back after each window and were sent away).
  expect(windows.length).toBeGreaterThanOrEqual(4);
  expect(early).toEqual([]);
  // During a storm the workers come back once per window, each of their 32 job slots at most once
  // (a storm of 5 s has at most 4 windows of 2 s begin in it), not at their usual rate.
  const windowsPerStorm = Math.ceil(STORM_MS / 2000) + 1;
  expect(inStorms).toBeLessThanOrEqual(storms.length * windowsPerStorm * 32);
  const limited = await database.handle.pool.query<{ n: number }>(
    `select count(*)::int as n from sync_runs where error_code = 'http_429' and subscriber_id >= $1`,
    [8_000_000],
  );
  expect(limited.rows[0]!.n).toBe(windows.length);

  await s.finish(workers, {
    scenario: '429 storm',
    faults: measured,
    faultCount: windows.length,
  });
});

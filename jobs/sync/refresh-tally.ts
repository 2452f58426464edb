import type { RefreshTally } from '../../db/refresh/index.js';
import type { RedisClient } from '../redis.js';

// Live counts of a refresh run (db/refresh/runs.ts `RefreshTally`), kept in Redis by the sync
// processor as each job reaches its final outcome. Atomic increments cost nothing under any
// concurrency and, unlike a watermark over `sync_runs` ids, never miss a transaction that commits
// out of order. The run is closed with exact counts from Postgres; these drive progress, the breaker
// and the end of the run. The sync processor writes them, so they live here; the refresh
// (jobs/refresh/checks.ts) reads them and writes them onto the run (db/refresh `applyTally`).

function tallyKey(prefix: string, runId: number): string {
  return `${prefix}:saved-cards-refresh:cards-sync:tally:${runId}`;
}

const FIELDS: (keyof RefreshTally)[] = [
  'finished',
  'succeeded',
  'failed',
  'notFound',
  'invalid',
  'wiped',
  'cardsAdded',
  'cardsRemoved',
  'cardsRestored',
];

export async function countOutcome(
  redis: RedisClient,
  prefix: string,
  runId: number,
  outcome: {
    kind: 'succeeded' | 'failed' | 'notFound' | 'invalid';
    wiped: boolean;
    added: number;
    removed: number;
    restored: number;
  },
): Promise<void> {
  const key = tallyKey(prefix, runId);
  const multi = redis.multi().hincrby(key, 'finished', 1).hincrby(key, outcome.kind, 1);
  if (outcome.wiped) multi.hincrby(key, 'wiped', 1);
  if (outcome.added) multi.hincrby(key, 'cardsAdded', outcome.added);
  if (outcome.removed) multi.hincrby(key, 'cardsRemoved', outcome.removed);
  if (outcome.restored) multi.hincrby(key, 'cardsRestored', outcome.restored);
  multi.expire(key, 14 * 86_400);
  await multi.exec();
}

export async function readTally(redis: RedisClient, prefix: string, runId: number): Promise<RefreshTally> {
  const raw = await redis.hgetall(tallyKey(prefix, runId));
  return Object.fromEntries(FIELDS.map((f) => [f, Number(raw[f] ?? 0)])) as unknown as RefreshTally;
}

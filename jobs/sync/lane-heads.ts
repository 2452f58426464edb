import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { LANE_PRIORITY, type Lane } from './lanes.js';
import type { SyncJobData, SyncJobResult } from './queue.js';

// How long the job at the head of each lane has waited, without reading the lanes through: a
// million waiting jobs cost what ten do. BullMQ keeps a job of priority p in the `prioritized` zset
// at score p * 2^32 + a counter taken when it enters the set (includes/getPriorityScore.lua), so
// the lowest score of a priority's range is the job that entered that lane first, the one a worker
// takes next from it; the wait list (the ops lane, priority 0) is taken from its right end. A job
// back from `delayed` (a retry after its backoff) enters its lane behind the jobs queued meanwhile,
// with a new counter: it is the head once those have gone. Each head's `timestamp` is when the
// job was first queued. One script, so the heads are read at one instant; on a Cluster every key
// of the queue (the job hashes too) shares the prefix's hash tag, so they are in the script's slot.
const LANE_HEADS = `
local heads = {}
local waiting = redis.call('LLEN', KEYS[1])
if waiting > 0 then
  local id = redis.call('LINDEX', KEYS[1], -1)
  heads[#heads + 1] = {0, waiting, redis.call('HGET', ARGV[1] .. id, 'timestamp') or ''}
end
local span = 4294967296
local from = '-inf'
while true do
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then break end
  local priority = math.floor(tonumber(first[2]) / span)
  local low = string.format('%.0f', priority * span)
  local high = string.format('(%.0f', (priority + 1) * span)
  local count = redis.call('ZCOUNT', KEYS[2], low, high)
  heads[#heads + 1] = {priority, count, redis.call('HGET', ARGV[1] .. first[1], 'timestamp') or ''}
  from = string.format('%.0f', (priority + 1) * span)
end
return heads
`;

/** One lane's waiting jobs: how many, and how long the one at its head has waited. */
export interface LaneWait {
  waiting: number;
  /** Seconds since the job at the lane's head was queued; null when none waits in it. */
  oldestWaitingSeconds: number | null;
}

export interface LaneHeads {
  /** The oldest of the heads of every lane (and of any other priority a job waits at). */
  oldestWaitingSeconds: number | null;
  /** The lane whose head that is; null when nothing waits (or it waits at no lane's priority). */
  oldestLane: Lane | null;
  lanes: Record<Lane, LaneWait>;
}

const LANES = Object.keys(LANE_PRIORITY) as Lane[];
const laneOf = (priority: number): Lane | undefined => LANES.find((l) => LANE_PRIORITY[l] === priority);

/** Reads the head of each lane of the sync queue in one round trip. */
export async function readLaneHeads(
  queue: Queue<SyncJobData, SyncJobResult>,
  redis: RedisClient,
  now = Date.now(),
): Promise<LaneHeads> {
  const rows = (await redis.eval(
    LANE_HEADS,
    2,
    queue.keys.wait!,
    queue.keys.prioritized!,
    queue.toKey(''),
  )) as [number, number, string][];
  const lanes = Object.fromEntries(
    LANES.map((l) => [l, { waiting: 0, oldestWaitingSeconds: null }]),
  ) as Record<Lane, LaneWait>;
  let oldest: { at: number; lane: Lane | null } | undefined;
  for (const [priority, waiting, timestamp] of rows) {
    const at = Number(timestamp);
    const lane = laneOf(Number(priority));
    // A head removed between the two reads has no hash left: its lane still counts its jobs.
    const age = timestamp === '' || !Number.isFinite(at) ? null : Math.max(0, Math.round((now - at) / 1000));
    if (lane) lanes[lane] = { waiting: Number(waiting), oldestWaitingSeconds: age };
    if (age !== null && (oldest === undefined || at < oldest.at)) oldest = { at, lane: lane ?? null };
  }
  return {
    oldestWaitingSeconds: oldest ? Math.max(0, Math.round((now - oldest.at) / 1000)) : null,
    oldestLane: oldest?.lane ?? null,
    lanes,
  };
}

/** `ops none, bulk 95 s of 600, refresh 11 s of 1200`: each lane's head and its waiting jobs. */
export function laneWaitsLine(lanes: Record<Lane, LaneWait>): string {
  return LANES.map((l) => {
    const w = lanes[l];
    return w.waiting === 0 || w.oldestWaitingSeconds === null
      ? `${l} none`
      : `${l} ${w.oldestWaitingSeconds} s of ${w.waiting}`;
  }).join(', ');
}

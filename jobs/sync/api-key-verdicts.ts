import type { RedisClient } from '../redis.js';
import type { RejectedKey } from './pause-record.js';
import { QUEUE_NAME } from './queue.js';

// What the API last said of each key the fleet uses, by fingerprint: when it last accepted the key
// and which process sent it, and every process it rejected the key of. One Redis hash: the fields
// `works:<fingerprint>` and `rejected:<fingerprint>:<process>`. A worker whose key is rejected reads
// it to decide whether the fault is its own key (another key works for a live process) or the
// fleet's; `status` and the overview read the rejections.

/** A process whose key the API rejected, and what it did about it. */
export interface KeyRejection extends RejectedKey {
  at: string;
  /** `process`: it stopped itself, another key working; `fleet`: it paused the queue. */
  scope: 'process' | 'fleet';
  /** The fingerprints that worked for live processes when it decided. */
  workingKeys: string[];
}

/** When the API last accepted a key, and from which process (its fleet id). */
interface KeyWorks {
  at: string;
  by: string;
}

/** Rejections older than this are dropped from the record. */
const REJECTIONS_KEPT_MS = 24 * 3600_000;
/** The whole record goes this long after its last write. */
const RECORD_TTL_S = 7 * 86_400;

function verdictsKey(prefix: string): string {
  return `${prefix}:${QUEUE_NAME}:cards-sync:api-keys`;
}

/** Now by Redis's clock: verdicts from many hosts compare by one clock. */
async function redisNow(redis: RedisClient): Promise<string> {
  const [s, us] = await redis.time();
  return new Date(Number(s) * 1000 + Math.floor(Number(us) / 1000)).toISOString();
}

/** Notes that the API accepted the key `fingerprint` from process `by`. */
export async function recordKeyWorks(
  redis: RedisClient,
  prefix: string,
  fingerprint: string,
  by: string,
): Promise<void> {
  const works: KeyWorks = { at: await redisNow(redis), by };
  await redis
    .multi()
    .hset(verdictsKey(prefix), `works:${fingerprint}`, JSON.stringify(works))
    .expire(verdictsKey(prefix), RECORD_TTL_S)
    .exec();
}

/** Notes a rejection; returns it with Redis's time. */
export async function recordKeyRejected(
  redis: RedisClient,
  prefix: string,
  rejection: Omit<KeyRejection, 'at'>,
): Promise<KeyRejection> {
  const full: KeyRejection = { ...rejection, at: await redisNow(redis) };
  const p = rejection.process;
  await redis
    .multi()
    .hset(
      verdictsKey(prefix),
      `rejected:${rejection.fingerprint}:${p.id ?? `${p.host}:${p.pid}`}`,
      JSON.stringify(full),
    )
    .expire(verdictsKey(prefix), RECORD_TTL_S)
    .exec();
  return full;
}

export interface KeyVerdicts {
  works: Map<string, KeyWorks>;
  /** Within {@link REJECTIONS_KEPT_MS}, newest first. */
  rejections: KeyRejection[];
}

/** Every verdict on record; rejections past {@link REJECTIONS_KEPT_MS} are dropped on the way. */
export async function readKeyVerdicts(redis: RedisClient, prefix: string): Promise<KeyVerdicts> {
  const all = await redis.hgetall(verdictsKey(prefix));
  const works = new Map<string, KeyWorks>();
  const rejections: KeyRejection[] = [];
  const stale: string[] = [];
  const oldest = Date.now() - REJECTIONS_KEPT_MS;
  for (const [field, raw] of Object.entries(all)) {
    try {
      if (field.startsWith('works:')) works.set(field.slice('works:'.length), JSON.parse(raw) as KeyWorks);
      else if (field.startsWith('rejected:')) {
        const r = JSON.parse(raw) as KeyRejection;
        if (Date.parse(r.at) < oldest) stale.push(field);
        else rejections.push(r);
      }
    } catch {
      stale.push(field);
    }
  }
  if (stale.length > 0) await redis.hdel(verdictsKey(prefix), ...stale).catch(() => {});
  rejections.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
  return { works, rejections };
}

/**
 * The keys other than `own` that work for a live process: accepted from a process still in the
 * fleet, and not rejected since. When there is one, a rejection of `own` is that key's fault, not
 * the fleet's.
 */
export function keysWorkingElsewhere(v: KeyVerdicts, own: string, live: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const [fingerprint, works] of v.works) {
    if (fingerprint === own || !live.has(works.by)) continue;
    const rejectedSince = v.rejections.some(
      (r) => r.fingerprint === fingerprint && Date.parse(r.at) >= Date.parse(works.at),
    );
    if (!rejectedSince) out.push(fingerprint);
  }
  return out.sort();
}

/** The rejections whose key has not worked since: what `status` and the overview show. */
export function standingRejections(v: KeyVerdicts): KeyRejection[] {
  return v.rejections.filter((r) => {
    const works = v.works.get(r.fingerprint);
    return works === undefined || Date.parse(works.at) < Date.parse(r.at);
  });
}

import type pg from 'pg';
import { sampledFrom, subscriberCount } from './schedule.js';

// What the plan fits the population's prior from: a sample of subscribers' observations
// with the evidence of their answers, as stored: the newest active card's createDate
// (`saved_cards.create_date`, its age at the last success, as the worker read it: the
// observations end there, and src/freshness/evidence.ts subtracts them from that age) and
// `subscribers.active_cards`. And the same of the subscribers a first mixture gives a stale rate.

/**
 * One sampled subscriber as stored: its observations and the evidence of its latest answer (the
 * shape of src/freshness/evidence.ts `EvidenceSample`, which the plan fits the prior to).
 */
interface StoredEvidenceSample {
  /** `change_observations` (src/freshness/observation.ts). */
  observations: number[] | null;
  /** Null when neither `active_cards` nor an active card's createDate is stored. */
  evidence: { newestCardAgeDays: number | null; cards: number } | null;
}

export interface EvidencePlanSample {
  total: number;
  samples: StoredEvidenceSample[];
}

export async function planEvidenceSample(pool: pg.Pool, size = 20_000): Promise<EvidencePlanSample> {
  const total = await subscriberCount(pool);
  const { rows } = await pool.query<EvidenceRow>(
    `select s.change_observations, s.active_cards, ${NEWEST_AGE_DAYS}
      from ${sampledFrom(total, size)} s limit $1`,
    [size],
  );
  return { total, samples: rows.map(sampleOf) };
}

/** A subscriber's observations and evidence as the queries here read them. */
interface EvidenceRow {
  change_observations: number[] | null;
  active_cards: number | null;
  newest_age_days: number | null;
}

/** The evidence of one row: the newest active card's age at the last success, and the cards held. */
function sampleOf(r: EvidenceRow): StoredEvidenceSample {
  return {
    observations: r.change_observations,
    evidence:
      r.active_cards === null && r.newest_age_days === null
        ? null
        : {
            newestCardAgeDays: r.newest_age_days === null ? null : Math.max(0, r.newest_age_days),
            cards: r.active_cards ?? 0,
          },
  };
}

/** The newest active card's age at the subscriber's last success, days (the evidence's). */
const NEWEST_AGE_DAYS = `(select extract(epoch from coalesce(s.last_success_at, now()) - max(c.create_date)) / 86400 from saved_cards c
          where c.subscriber_id = s.subscriber_id and c.removed_at is null)::float8 as newest_age_days`;

/**
 * The next `limit` subscribers after `afterId` (in id order) with observations of their own and no
 * stale rate stored: synced before the plan had a mixture (migration 0038, src/freshness
 * `staleRateOf`). A page of the primary key at a time, so a pass over the table reads it once.
 */
export async function withoutStaleRate(
  pool: pg.Pool,
  afterId: number,
  limit = 5000,
): Promise<(StoredEvidenceSample & { id: number; observations: number[] })[]> {
  const { rows } = await pool.query<
    EvidenceRow & { subscriber_id: number | string; change_observations: number[] }
  >(
    `select s.subscriber_id, s.change_observations, s.active_cards, ${NEWEST_AGE_DAYS}
      from subscribers s
      where s.subscriber_id > $1 and s.stale_rate_per_day is null and cardinality(s.change_observations) > 0
      order by s.subscriber_id limit $2`,
    [afterId, limit],
  );
  return rows.map((r) => ({
    ...sampleOf(r),
    id: Number(r.subscriber_id),
    observations: r.change_observations,
  }));
}

/**
 * Stores each row's stale rate where none is stored yet: a sync since has stored its own, from a
 * later posterior, and keeps it. A row a sync is writing is skipped, not waited for (that sync stores
 * its own), so the pass never holds a lock a sync waits on. Returns how many it stored.
 */
export async function fillStaleRates(
  pool: pg.Pool,
  rows: readonly { id: number; staleRatePerDay: number }[],
): Promise<number> {
  if (rows.length === 0) return 0;
  const { rowCount } = await pool.query(
    `update subscribers s set stale_rate_per_day = v.rate
      from unnest($1::bigint[], $2::float8[]) as v(id, rate)
      where s.subscriber_id = v.id and s.stale_rate_per_day is null
        and s.subscriber_id in (select subscriber_id from subscribers
          where subscriber_id = any($1::bigint[]) and stale_rate_per_day is null for update skip locked)`,
    [rows.map((r) => r.id), rows.map((r) => r.staleRatePerDay)],
  );
  return rowCount ?? 0;
}

import type pg from 'pg';
import { sampledFrom, subscriberCount } from './schedule.js';

// What the plan fits the population's prior from: a sample of subscribers' observations
// with the evidence of their answers, as stored: the newest active card's createDate
// (`saved_cards.create_date`, its age at the last success, as the worker read it: the
// observations end there, and src/freshness/evidence.ts subtracts them from that age) and
// `subscribers.active_cards`.

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
  const { rows } = await pool.query<{
    change_observations: number[] | null;
    active_cards: number | null;
    newest_age_days: number | null;
  }>(
    `select s.change_observations, s.active_cards,
        (select extract(epoch from coalesce(s.last_success_at, now()) - max(c.create_date)) / 86400 from saved_cards c
          where c.subscriber_id = s.subscriber_id and c.removed_at is null)::float8 as newest_age_days
      from ${sampledFrom(total, size)} s limit $1`,
    [size],
  );
  return {
    total,
    samples: rows.map((r) => ({
      observations: r.change_observations,
      evidence:
        r.active_cards === null && r.newest_age_days === null
          ? null
          : {
              newestCardAgeDays: r.newest_age_days === null ? null : Math.max(0, r.newest_age_days),
              cards: r.active_cards ?? 0,
            },
    })),
  };
}

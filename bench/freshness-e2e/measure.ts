import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { type Freshness, readFreshness } from '../../db/refresh/freshness.js';
import { STALE_MODEL } from '../../src/freshness/index.js';
import type { MockApi } from '../../src/mock-api/server.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { BENCH_CARD_TOKEN_KEYS } from '../harness.js';

// What bench:freshness-e2e takes of a running set-up: every `--sample`, its stored cards against
// its sandbox's truth (and, for continuous, what `status` says of its freshness); at the end, the
// syncs its ledger recorded after the warm-up.

export type Setup = 'continuous' | 'round-robin';

export interface Sample {
  atMs: number;
  /** The subscribers counted: everyone, or with `--intake` before its moment everyone but its subscribers. */
  population: number;
  stale: number;
  /** Stale among the woken wallets (`--wake-up`), and among the wallets always at their rate. */
  wokenStale: number;
  peersStale: number;
  /** Largest time since a subscriber's last success, ms. */
  oldestMs: number;
  freshness?: Freshness;
}

export interface Running {
  setup: Setup;
  pool: pg.Pool;
  mock: MockApi;
  /** Its worker processes: one, or two under `--kill-every` (a killed one replaced in its place). */
  workers: ChildProcess[];
  samples: Sample[];
  stop(): Promise<void>;
}

/**
 * Takes samples of subscribers 1..`n` that have `arrived` (`--intake`: an intake's subscribers
 * count from their moment on, without a copy until their first sync); `woken` and `peers`
 * (`--wake-up`) are the wallets that wake and those always at the woken rate, as the sandbox has them.
 */
export function sampler(
  n: number,
  /** The max age in force at a moment (`--retune` changes it). */
  maxAgeAt: (atMs: number) => number,
  woken: ReadonlySet<number>,
  peers: ReadonlySet<number>,
  arrived: (subscriberId: number, atMs: number) => boolean = () => true,
): (r: Running) => Promise<Sample> {
  const truthCache = new Map<number, { version: number; key: string }>();
  // The copies' tokens are sealed (CARD_TOKEN_ENCRYPTION=on, as in production); each carries the
  // fingerprint of its token under the run's key ring, which the truth's tokens are given here too.
  // With the bank name alone, a card reissued twice between two syncs would look fresh again: its
  // name flips back while its token does not.
  const ring = parseKeyRing(BENCH_CARD_TOKEN_KEYS);

  /** The stale count: subscribers whose stored active cards (id, bank name, token) differ from the sandbox's right now. */
  return async function measure(r: Running): Promise<Sample> {
    const [stored, ages] = await Promise.all([
      r.pool.query<{ subscriber_id: string; cards: string }>(
        `select subscriber_id,
                string_agg(id || ':' || card_bank_name || ':' || card_token_fingerprint, ',' order by id) as cards
           from saved_cards where removed_at is null group by subscriber_id`,
      ),
      r.pool.query<{ oldest: number | null }>(
        `select extract(epoch from now() - min(last_success_at))::float8 * 1000 as oldest from subscribers`,
      ),
    ]);
    const atMs = Date.now();
    const copy = new Map(stored.rows.map((row) => [Number(row.subscriber_id), row.cards]));
    let stale = 0;
    let population = 0;
    let wokenStale = 0;
    let peersStale = 0;
    for (let id = 1; id <= n; id++) {
      if (!arrived(id, atMs)) continue;
      population += 1;
      // Both sandboxes hold the same changes: one key per (subscriber, version) serves both.
      const version = r.mock.version(id);
      let cached = truthCache.get(id);
      if (cached?.version !== version) {
        const key = r.mock
          .truth(id)
          .map((c) => `${c.id}:${c.cardBankName}:${ring.fingerprint(c.cardToken)}`)
          .join(',');
        cached = { version, key };
        truthCache.set(id, cached);
      }
      if (copy.get(id) !== cached.key) {
        stale += 1;
        if (woken.has(id)) wokenStale += 1;
        else if (peers.has(id)) peersStale += 1;
      }
    }
    const sample: Sample = {
      atMs,
      population,
      stale,
      wokenStale,
      peersStale,
      oldestMs: ages.rows[0]?.oldest ?? Number.POSITIVE_INFINITY,
    };
    if (r.setup === 'continuous') sample.freshness = await readFreshness(r.pool, maxAgeAt(atMs), STALE_MODEL);
    return sample;
  };
}

/**
 * The successful syncs in the ledger from `fromMs` to `toMs`, the audits among them, and the
 * audits that found a change.
 */
export async function syncCounts(
  r: Running,
  fromMs: number,
  toMs: number,
): Promise<{ syncs: number; audits: number; changed: number }> {
  const { rows } = await r.pool.query<{ syncs: number; audits: number; changed: number }>(
    `select count(*)::int as syncs,
        count(*) filter (where trigger = 'audit')::int as audits,
        count(*) filter (where trigger = 'audit' and inserted + updated + removed + restored > 0)::int as changed
       from sync_runs where started_at >= $1 and started_at < $2 and status = 'succeeded'`,
    [new Date(fromMs), new Date(toMs)],
  );
  return rows[0]!;
}

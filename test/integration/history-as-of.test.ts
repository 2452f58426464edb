import { describe, expect, it } from 'vitest';
import type { SavedCard } from '../../db/sync/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import type { CardsToApply } from '../../src/sync/cards-to-apply.js';
import { testTokens } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// saved_cards_as_of(at) and saved_card_history, held against the truth: a random sequence of
// syncs (cards added, changed, removed, restored, moved between subscribers, answers unchanged)
// with a snapshot of saved_cards after each one. For every snapshot's time, the function must
// return exactly the snapshot, and the history view exactly its active cards.

const database = useTestDatabase();
const STEPS = Number(process.env.HISTORY_PROPERTY_STEPS ?? 1000);
const SEED = Number(process.env.HISTORY_PROPERTY_SEED ?? Date.now() % 1_000_000);

/** mulberry32: a small seeded PRNG, so a failing sequence can be run again with its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    below: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!,
    chance: (p: number) => next() < p,
  };
}

const SUBSCRIBERS = [61_001, 61_002, 61_003, 61_004, 61_005];
const BANKS = ['AKBA', 'ISBANK', 'GARANTI', 'YAPIKREDI', 'ZIRAAT'];
const FAMILIES = ['Bonus', 'World', 'Maximum', ''];

interface UpstreamCard extends SavedCard {
  /** Null while no subscriber's answer lists it. */
  owner: number | null;
}

const COLUMNS = `id, subscriber_id, bin_number, card_family, card_bank_code, card_bank_name, company_id,
  create_date, first_seen_at, last_seen_at, updated_at, removed_at`;

type Row = Record<string, unknown>;
const normalise = (rows: Row[]) =>
  rows.map((r) =>
    Object.fromEntries(
      Object.entries(r).map(([k, v]) => [
        k,
        v instanceof Date ? v.toISOString() : v === null ? null : String(v),
      ]),
    ),
  );

describe('saved_cards_as_of and saved_card_history against snapshots of a random history', () => {
  it(`${STEPS} random steps: every snapshot time rebuilds exactly (seed from HISTORY_PROPERTY_SEED)`, async () => {
    const pool = database.handle.pool;
    const r = prng(SEED);
    const upstream = new Map<number, UpstreamCard>();
    let nextId = 8_800_000;
    const ops: Record<string, number> = {};
    const snapshots: { at: Date; rows: Row[] }[] = [];

    const newCard = (owner: number): UpstreamCard => ({
      id: nextId++,
      owner,
      subscriberId: owner,
      cardToken: `tok-${nextId}-${r.below(1e9)}`,
      binNumber: `4${r.below(900) + 100}-xxxx-xxxx-${String(r.below(10_000)).padStart(4, '0')}`,
      cardFamily: r.pick(FAMILIES),
      cardBankCode: 100_000 + r.below(5),
      cardBankName: r.pick(BANKS),
      companyId: r.below(3) - 1,
      createDate: `2021-0${1 + r.below(9)}-1${r.below(10)}T10:00:00+03:00`,
    });
    const change = (c: UpstreamCard) => {
      switch (r.below(5)) {
        case 0:
          c.cardBankName = r.pick(BANKS);
          c.cardBankCode = 100_000 + r.below(5);
          break;
        case 1:
          c.cardFamily = r.pick(FAMILIES);
          break;
        case 2:
          c.cardToken = `tok-${c.id}-${r.below(1e9)}`;
          break;
        case 3:
          c.companyId = r.below(3) - 1;
          break;
        default:
          c.createDate = `2022-0${1 + r.below(9)}-0${1 + r.below(9)}T08:30:00+03:00`;
      }
    };
    const answer = (s: number): CardsToApply => ({
      subscriberId: s,
      cards: [...upstream.values()]
        .filter((c) => c.owner === s)
        .map(({ owner: _owner, ...c }) => ({ ...c, subscriberId: s })),
      run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
    });

    for (let step = 0; step < STEPS; step++) {
      const owned = [...upstream.values()].filter((c) => c.owner !== null);
      const unowned = [...upstream.values()].filter((c) => c.owner === null);
      const roll = r.below(100);
      let touched: number[];
      let op: string;
      if (roll < 25 || owned.length === 0) {
        const c = newCard(r.pick(SUBSCRIBERS));
        upstream.set(c.id, c);
        [op, touched] = ['add', [c.owner!]];
      } else if (roll < 50) {
        const c = r.pick(owned);
        change(c);
        if (r.chance(0.3)) change(c);
        [op, touched] = ['change', [c.owner!]];
      } else if (roll < 65) {
        const c = r.pick(owned);
        const was = c.owner!;
        c.owner = null;
        [op, touched] = ['remove', [was]];
      } else if (roll < 77 && unowned.length > 0) {
        const c = r.pick(unowned);
        c.owner = r.pick(SUBSCRIBERS);
        if (r.chance(0.4)) change(c);
        [op, touched] = ['restore', [c.owner]];
      } else if (roll < 90) {
        const c = r.pick(owned);
        const was = c.owner!;
        c.owner = r.pick(SUBSCRIBERS.filter((s) => s !== was));
        if (r.chance(0.3)) change(c);
        // The old owner's sync may come first, later, together or not at all.
        const order = r.below(4);
        touched = order === 0 ? [c.owner] : order === 1 ? [c.owner, was] : order === 2 ? [was, c.owner] : [];
        if (order === 3) {
          await applyCardsBatch(database.handle.db, testTokens, [answer(c.owner), answer(was)]);
        }
        op = 'move';
      } else {
        [op, touched] = ['unchanged', [r.pick(SUBSCRIBERS)]];
      }
      ops[op] = (ops[op] ?? 0) + 1;
      for (const s of touched) {
        const [result] = await applyCardsBatch(database.handle.db, testTokens, [answer(s)]);
        expect(result!.status, `seed ${SEED} step ${step}`).toBe('succeeded');
      }
      const at = new Date();
      // An active card's last_seen_at is carried by its subscriber's last success (docs/analytics.md).
      const { rows } = await pool.query(`select ${COLUMNS.replace(
        'last_seen_at',
        'case when c.removed_at is null then greatest(c.last_seen_at, s.last_success_at) else c.last_seen_at end as last_seen_at',
      ).replace('id, subscriber_id', 'c.id, c.subscriber_id')}
        from saved_cards c left join subscribers s on s.subscriber_id = c.subscriber_id order by c.id`);
      snapshots.push({ at, rows: normalise(rows) });
      // The next sync's time must come after this snapshot's.
      await new Promise((done) => setTimeout(done, 2));
    }

    // Every snapshot in one round trip per question (a query per snapshot would mostly measure
    // round trips): row k of each answer belongs to snapshot k.
    const ats = snapshots.map((s) => s.at);
    const whos = snapshots.map((_, k) => SUBSCRIBERS[k % SUBSCRIBERS.length]!);
    const byK = (rows: Row[]) => {
      const out = snapshots.map((): Row[] => []);
      for (const { k, ...row } of rows) out[Number(k) - 1]!.push(row);
      return out;
    };
    /** Runs `text` over the snapshots 100 at a time (one statement for all would hit the timeout). */
    const inChunks = async (text: string, params: (k: number) => unknown[][]) => {
      const rows: Row[] = [];
      for (let from = 0; from < snapshots.length; from += 100) {
        const idx = snapshots.slice(from, from + 100).map((_, i) => from + i);
        const values = params(0).map((_, p) => idx.map((k) => params(k)[p]![0]));
        const r = await pool.query(text, values);
        for (const row of r.rows) rows.push({ ...row, k: Number(row.k) + from });
      }
      return byK(rows);
    };
    const asOf = await inChunks(
      `select t.k, v.${COLUMNS.replace(/,\s*/g, ', v.')}, v.exact
       from unnest($1::timestamptz[]) with ordinality t(at, k)
       cross join lateral saved_cards_as_of(t.at) v order by t.k, v.id`,
      (k) => [[ats[k]]],
    );
    const wallets = await inChunks(
      `select t.k, v.${COLUMNS.replace(/,\s*/g, ', v.')}
       from unnest($1::timestamptz[], $2::bigint[]) with ordinality t(at, who, k)
       cross join lateral saved_cards_as_of(t.at, t.who) v order by t.k, v.id`,
      (k) => [[ats[k]], [whos[k]]],
    );
    const histories = await inChunks(
      `select t.k, h.id, h.subscriber_id, h.bin_number, h.card_family, h.card_bank_code,
         h.card_bank_name, h.company_id, h.create_date, h.first_seen_at, h.updated_at
       from unnest($1::timestamptz[]) with ordinality t(at, k)
       join saved_card_history h on h.valid_from <= t.at and (h.valid_to is null or h.valid_to > t.at)
       where h.card_id = h.id
       order by t.k, h.id`,
      // The view rebuilds every version of every card: every tenth snapshot keeps it affordable.
      (k) => [[k % 10 === 0 ? ats[k] : new Date(0)]],
    );
    for (const [k, snap] of snapshots.entries()) {
      const rows = asOf[k]!;
      expect(
        rows.every((row) => row.exact === true),
        `seed ${SEED} snapshot ${k}: exact`,
      ).toBe(true);
      expect(
        normalise(rows.map(({ exact: _exact, ...row }) => row)),
        `seed ${SEED} snapshot ${k} of ${snapshots.length}`,
      ).toEqual(snap.rows);
      // One subscriber's wallet then: the same rows, those it owned.
      expect(normalise(wallets[k]!), `seed ${SEED} wallet of ${whos[k]} at snapshot ${k}`).toEqual(
        snap.rows.filter((row) => row.subscriber_id === String(whos[k])),
      );
      const active = snap.rows
        .filter((row) => row.removed_at === null)
        .map(({ last_seen_at: _l, removed_at: _r, ...row }) => row);
      if (k % 10 === 0) {
        expect(normalise(histories[k]!), `seed ${SEED} history at snapshot ${k}`).toEqual(active);
      }
    }
    // The sequence exercised every kind of step, and the history carries what analysts need.
    expect(Object.keys(ops).sort()).toEqual(['add', 'change', 'move', 'remove', 'restore', 'unchanged']);
    const kinds = await pool.query<{ change: string; reason: string | null; with_previous: number }>(
      `select change, reason, count(*) filter (where previous is not null)::int as with_previous
       from saved_card_changes group by 1, 2 order by 1, 2`,
    );
    const byKind = Object.fromEntries(
      kinds.rows.map((k) => [`${k.change}/${k.reason ?? ''}`, k.with_previous]),
    );
    // A move whose new owner syncs before its old one is a conflict until the old one drops it;
    // the move that ends it is a restore, or an update when both answers share a batch.
    const kindsSeen = Object.keys(byKind).sort();
    expect(kindsSeen).toEqual(expect.arrayContaining(['added/', 'conflict/held_by_another', 'removed/']));
    expect(kindsSeen).toEqual(expect.arrayContaining(['removed/moved', 'restored/', 'updated/']));
    expect(kindsSeen).toEqual(expect.arrayContaining(['restored/conflict_resolved']));
    for (const kind of kindsSeen) {
      expect([
        'added/',
        'conflict/held_by_another',
        'removed/',
        'removed/moved',
        'restored/',
        'restored/conflict_resolved',
        'updated/',
        'updated/conflict_resolved',
      ]).toContain(kind);
    }
    expect(byKind['updated/']).toBeGreaterThan(0);
    expect(byKind['restored/']).toBeGreaterThan(0);
    const tokens = await pool.query(
      `select count(*)::int as n from saved_card_changes where previous::text like '%tok-%'`,
    );
    expect(tokens.rows[0]!.n).toBe(0);
  }, 480_000);
});

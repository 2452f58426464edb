import { afterEach, describe, expect, it } from 'vitest';
import { parseCards } from '../../src/api/schema.js';
import { parseChanges, parseWakeUp, walletChanges } from '../../src/mock-api/changes.js';
import { cardsAtVersion, cardsFor } from '../../src/mock-api/data.js';
import { parseCreatedDates } from '../../src/mock-api/parse.js';
import { createMockApi, type MockApi } from '../../src/mock-api/server.js';
import { parseChangeKinds, parseWalletCards, wallets } from '../../src/mock-api/wallets.js';
import { runCli } from '../support/queue-helpers.js';

// `mock-api --changes`: the sandbox's wallets change over wall time at stated rates (the end-to-end run's
// end-to-end run compares the tables with this truth).

describe('mock-api --changes', () => {
  let mock: MockApi | undefined;
  afterEach(async () => {
    await mock?.stop();
    mock = undefined;
  });

  it('reads share:rate pairs and refuses anything else with the rule', () => {
    expect(parseChanges('0.7:0,0.2:1/h,0.08:12/h,0.02:1/m')).toEqual([
      { share: 0.7, perSecond: 0 },
      { share: 0.2, perSecond: 1 / 3600 },
      { share: 0.08, perSecond: 12 / 3600 },
      { share: 0.02, perSecond: 1 / 60 },
    ]);
    expect(parseChanges('0.5:2/d')).toEqual([{ share: 0.5, perSecond: 2 / 86_400 }]);
    for (const bad of ['', '0.5', '0.5:12/x', '1.5:1/h', 'a:1/h', '0.5:-1/h']) {
      expect(() => parseChanges(bad)).toThrow(/--changes takes share:rate pairs/);
    }
    expect(() => parseChanges('0.6:1/h,0.6:0')).toThrow('--changes: the shares sum to 1.2, more than 1');
  });

  it('takes lower-case units only, as REFRESH_MAX_AGE does: 1/M is minutes or months, so neither', () => {
    expect(() => parseChanges('0.5:1/M')).toThrow(/lower-case s, m, h, d, w/);
    expect(() => parseChanges('0.5:1/H')).toThrow(/lower-case/);
    expect(parseWakeUp('0.1:12/h@10m')).toEqual({ share: 0.1, perSecond: 12 / 3600, afterMs: 600_000 });
    expect(() => parseWakeUp('0.1:12/h@10M')).toThrow(/lower-case s, m, h, d, w/);
    expect(() => parseWakeUp('0.1:12/H@10m')).toThrow(/--wake-up takes share:rate@after/);
  });

  it('draws the same changes for the same seed and start, at the stated shares', () => {
    const classes = parseChanges('0.2:60/m,0.3:0');
    const a = walletChanges(classes, 0, 3);
    const b = walletChanges(classes, 0, 3);
    let busy = 0;
    for (let id = 1; id <= 5000; id++) {
      expect(a.versionAt(id, 60_000)).toBe(b.versionAt(id, 60_000));
      if (a.rateOf(id) > 0) busy += 1;
    }
    expect(busy / 5000).toBeGreaterThan(0.17);
    expect(busy / 5000).toBeLessThan(0.23);
    // A busy wallet (60 changes a minute) has changed about 60 times in a minute; a quiet one never.
    const busyId = [...Array(100).keys()].map((i) => i + 1).find((id) => a.rateOf(id) > 0)!;
    const quietId = [...Array(100).keys()].map((i) => i + 1).find((id) => a.rateOf(id) === 0)!;
    expect(a.versionAt(busyId, 60_000)).toBeGreaterThan(30);
    expect(a.versionAt(busyId, 60_000)).toBeLessThan(100);
    expect(a.versionAt(quietId, 3_600_000)).toBe(0);
    // A different seed draws other changes.
    const c = walletChanges(classes, 0, 4);
    const differs = [...Array(200).keys()].some(
      (i) => c.versionAt(i + 1, 60_000) !== a.versionAt(i + 1, 60_000),
    );
    expect(differs).toBe(true);
  });

  it('answers each lookup with the wallet as it stands at that moment, over HTTP', async () => {
    let now = 1_000_000;
    mock = createMockApi({
      apiKey: 'k',
      changes: { classes: parseChanges('1:1/s'), seed: 1, startMs: now, clock: () => now },
    });
    const url = await mock.start();
    const get = async (id: number) =>
      (
        await fetch(`${url}/api/saved-cards/subscriber/${id}`, { headers: { authorization: 'Apikey k' } })
      ).json();
    expect(await get(7)).toEqual(cardsFor(7));
    expect(mock.version(7)).toBe(0);
    now += 60_000; // about 60 changes later
    const later = await get(7);
    expect(mock.version(7)).toBeGreaterThan(20);
    expect(later).toEqual(mock.truth(7));
    expect(later).not.toEqual(cardsFor(7));
    // Ids stay those of the subscriber's cards; tokens moved on, bank names stayed real ones.
    for (const card of later as { id: number; subscriberId: number; cardBankName: string }[]) {
      expect(card.subscriberId).toBe(7);
      expect(card.cardBankName).not.toMatch(/-\d+$/);
    }
    expect(mock.changeRate(7)).toBe(1);
  });

  it("a change moves tokens on; bank names stay the real banks' own, each with its code, the same for the same seed", () => {
    // The five banks of the provider's sample, each by its short and its legal name.
    const REAL: Record<string, number> = {
      AKBA: 100100000,
      'AKBANK T.A.S.': 100100000,
      GARANTI: 100200000,
      'T. GARANTI BANKASI A.S.': 100200000,
      YAPIKREDI: 100300000,
      'YAPI VE KREDI BANKASI A.S.': 100300000,
      ISBANK: 100400000,
      'T. IS BANKASI A.S.': 100400000,
      ZIRAAT: 100500000,
      'T.C. ZIRAAT BANKASI A.S.': 100500000,
    };
    const seen = new Set<string>();
    for (let id = 1; id <= 300; id++) {
      for (const version of [0, 1, 2, 7, 1_000]) {
        const cards = cardsAtVersion(id, version);
        expect(cardsAtVersion(id, version)).toEqual(cards);
        for (const card of cards) {
          expect(REAL, `subscriber ${id} version ${version}: ${card.cardBankName}`).toHaveProperty(
            [card.cardBankName],
            card.cardBankCode,
          );
          seen.add(card.cardBankName);
        }
      }
      // A change is always visible upstream: every card that stays has a new token.
      const before = new Map(cardsAtVersion(id, 1).map((c) => [c.id, c.cardToken]));
      for (const card of cardsAtVersion(id, 2))
        if (before.has(card.id)) expect(card.cardToken).not.toBe(before.get(card.id));
    }
    // Both names of every bank turn up: a report by name finds 10 names of 5 banks, never 66.
    expect([...seen].sort()).toEqual(Object.keys(REAL).sort());
    // `mock-api --generation` draws from the same names.
    for (const card of cardsFor(42, { generation: 3 }))
      expect(REAL[card.cardBankName]).toBe(card.cardBankCode);
  });

  it('refuses a bad --changes on the command line with exit 2', async () => {
    const run = await runCli(['mock-api', '--port', '0', '--changes', '0.5:3/y'], {});
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--changes takes share:rate pairs');
  });
});

describe('mock-api --created-dates from-changes', () => {
  it("dates an added card at its change, a busy wallet's first cards before the start from its rate, a quiet one's years ago; the same every time", () => {
    const start = Date.UTC(2026, 10, 25);
    const classes = parseChanges('0.5:60/m,0.5:0');
    const world = (clock: number) => {
      const mock = createMockApi({
        changes: { classes, seed: 4, startMs: start, clock: () => clock, createdDates: 'from-changes' },
      });
      return mock;
    };
    const a = world(start + 120_000);
    const b = world(start + 120_000);
    let busy = 0;
    for (let id = 1; id <= 200; id++) {
      const cards = a.truth(id);
      expect(cards).toEqual(b.truth(id));
      const newest = Math.max(...cards.map((c) => Date.parse(c.createDate)));
      if (a.changeRate(id) > 0) {
        busy += 1;
        // 60 changes a minute, 3 in 8 adding a card: the newest is seconds to minutes old.
        expect(start + 120_000 - newest).toBeLessThan(30 * 60_000);
      } else expect(start - newest).toBeGreaterThan(365 * 86_400_000);
    }
    expect(busy).toBeGreaterThan(50);
    // The control keeps the dates unrelated to change.
    const control = createMockApi({
      changes: { classes, seed: 4, startMs: start, clock: () => start + 120_000 },
    });
    for (let id = 1; id <= 50; id++) {
      expect(control.truth(id).every((c) => start - Date.parse(c.createDate) > 365 * 86_400_000)).toBe(true);
    }
  });
});

describe('mock-api --created-dates predating', () => {
  it('dates every card held at the start 2 to 6 years back, busy wallet or quiet, and an added card at its change', () => {
    const start = Date.UTC(2026, 10, 25);
    const YEAR = 365 * 86_400_000;
    const classes = parseChanges('0.5:60/m,0.5:0');
    const at = (clock: number) =>
      createMockApi({
        changes: { classes, seed: 4, startMs: start, clock: () => clock, createdDates: 'predating' },
      });
    const before = at(start);
    const later = at(start + 120_000);
    let dated = 0;
    for (let id = 1; id <= 200; id++) {
      for (const c of before.truth(id)) {
        const age = start - Date.parse(c.createDate);
        expect(age).toBeGreaterThanOrEqual(2 * YEAR - 1000);
        expect(age).toBeLessThanOrEqual(6 * YEAR);
      }
      // Two minutes of 60 changes a minute: the cards added since carry their change's second.
      const newest = Math.max(...later.truth(id).map((c) => Date.parse(c.createDate)));
      if (later.changeRate(id) > 0 && newest > start) {
        dated += 1;
        expect(newest).toBeLessThanOrEqual(start + 120_000);
      } else if (later.changeRate(id) === 0) expect(start - newest).toBeGreaterThan(2 * YEAR - 1000);
    }
    expect(dated).toBeGreaterThan(50);
    expect(parseCreatedDates('predating')).toBe('predating');
    expect(() => parseCreatedDates('sometimes')).toThrow(
      '--created-dates takes random, from-changes or predating',
    );
  });
});

describe('mock-api --change-kinds and --wallet-cards', () => {
  const start = Date.UTC(2026, 10, 25);
  const busy = parseChanges('1:60/m');
  const key = (cards: { id: number; cardBankName: string }[]) =>
    cards.map((c) => `${c.id}:${c.cardBankName}`).join(',');

  it('reads kind:share pairs summing to 1 and MIN-MAX cards, and refuses anything else with the rule', () => {
    expect(parseChangeKinds('add:0.5,remove:0.25,replace:0.25')).toEqual({
      add: 0.5,
      remove: 0.25,
      replace: 0.25,
    });
    expect(parseChangeKinds('remove:0.4,replace:0.6')).toEqual({ add: 0, remove: 0.4, replace: 0.6 });
    for (const bad of ['', 'add:0.5', 'add:1,add:0', 'move:1', 'add:-1,remove:2', 'add:1.5']) {
      expect(() => parseChangeKinds(bad), bad).toThrow(/--change-kinds/);
    }
    expect(parseWalletCards('1-5')).toEqual({ minCards: 1, maxCards: 5 });
    for (const bad of ['0-5', '5-1', '1', '1-99', 'a-b']) {
      expect(() => parseWalletCards(bad), bad).toThrow(/--wallet-cards takes MIN-MAX/);
    }
  });

  it('keeps every wallet within 1 to 5 cards through a thousand changes, reaching both ends, and every change shows', () => {
    const rules = { minCards: 1, maxCards: 5, kinds: { add: 0.5, remove: 0.25, replace: 0.25 } };
    const changes = walletChanges(busy, start, 3);
    const world = wallets(rules, changes, 'from-changes', start, 3);
    const atStart = new Set<number>();
    const seen = new Set<number>();
    for (let id = 1; id <= 40; id++) {
      changes.versionAt(id, start + 25 * 60_000);
      let previous = world.cardsAt(id, 0);
      atStart.add(previous.length);
      for (let v = 1; v <= 25; v++) {
        const cards = world.cardsAt(id, v);
        expect(cards.length).toBeGreaterThanOrEqual(1);
        expect(cards.length).toBeLessThanOrEqual(5);
        seen.add(cards.length);
        // The end-to-end run compares ids and bank names: no change may hide from it.
        expect(key(cards)).not.toBe(key(previous));
        // An answer the product takes as it is: the API's rules, unique ids, the subscriber's own.
        expect(parseCards(JSON.parse(JSON.stringify(cards)), { subscriberId: id })).toEqual(cards);
        previous = cards;
      }
    }
    expect([...atStart].sort()).toEqual([1, 2, 3, 4, 5]);
    expect([...seen].sort()).toEqual([1, 2, 3, 4, 5]);
    // The same seed, the same wallets, asked afresh.
    const sameChanges = walletChanges(busy, start, 3);
    sameChanges.versionAt(7, start + 25 * 60_000);
    const again = wallets(rules, sameChanges, 'from-changes', start, 3);
    expect(again.cardsAt(7, 12)).toEqual(world.cardsAt(7, 12));
  });

  it('an addition dates a new card at its change; a removal or a reissue brings no new date; a reissue keeps id and date', () => {
    const rules = { minCards: 1, maxCards: 5, kinds: { add: 0.2, remove: 0.3, replace: 0.5 } };
    const changes = walletChanges(busy, start, 5);
    const world = wallets(rules, changes, 'from-changes', start, 5);
    const kinds = { add: 0, remove: 0, replace: 0 };
    for (let id = 1; id <= 40; id++) {
      changes.versionAt(id, start + 20 * 60_000);
      for (let v = 1; v <= 20; v++) {
        const before = world.cardsAt(id, v - 1);
        const after = world.cardsAt(id, v);
        const kind = world.kindOf(id, v);
        kinds[kind] += 1;
        const dates = (cards: typeof after) => new Set(cards.map((c) => c.createDate));
        if (kind === 'add') {
          const added = after.filter((c) => !before.some((b) => b.id === c.id));
          expect(added).toHaveLength(1);
          expect(Date.parse(added[0]!.createDate)).toBe(Math.floor(changes.changedAt(id, v) / 1000) * 1000);
        } else {
          // Nothing new: every date after the change was there before it.
          for (const d of dates(after)) expect(dates(before).has(d)).toBe(true);
          if (kind === 'remove') expect(after).toHaveLength(before.length - 1);
          else {
            expect(after.map((c) => [c.id, c.createDate])).toEqual(before.map((c) => [c.id, c.createDate]));
            const reissued = after.filter((c, i) => c.cardToken !== before[i]!.cardToken);
            expect(reissued).toHaveLength(1);
          }
        }
      }
    }
    expect(kinds.add).toBeGreaterThan(80);
    expect(kinds.remove).toBeGreaterThan(120);
    expect(kinds.replace).toBeGreaterThan(300);
  });

  it('answers over HTTP with the wallets of its kinds, and refuses a bad --change-kinds with exit 2', async () => {
    let now = start;
    const mock = createMockApi({
      apiKey: 'k',
      changes: {
        classes: busy,
        seed: 2,
        startMs: start,
        clock: () => now,
        createdDates: 'from-changes',
        wallets: { minCards: 1, maxCards: 5, kinds: { add: 0, remove: 0, replace: 1 } },
      },
    });
    const url = await mock.start();
    try {
      const get = async (id: number) =>
        (
          await fetch(`${url}/api/saved-cards/subscriber/${id}`, { headers: { authorization: 'Apikey k' } })
        ).json();
      const first = (await get(9)) as { id: number; createDate: string }[];
      now += 60_000;
      const later = (await get(9)) as { id: number; createDate: string }[];
      expect(later).toEqual(mock.truth(9));
      // Only reissues: the same cards, the same dates, new tokens.
      expect(later.map((c) => [c.id, c.createDate])).toEqual(first.map((c) => [c.id, c.createDate]));
      expect(later).not.toEqual(first);
    } finally {
      await mock.stop();
    }
    const run = await runCli(
      ['mock-api', '--port', '0', '--changes', '1:1/h', '--change-kinds', 'add:2'],
      {},
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--change-kinds takes kind:share pairs');
    const alone = await runCli(
      ['mock-api', '--port', '0', '--changes', '1:1/h', '--wallet-cards', '1-5'],
      {},
    );
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--wallet-cards needs --change-kinds');
  });
});

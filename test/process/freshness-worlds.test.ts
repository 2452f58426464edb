import { describe, expect, it } from 'vitest';
import { E2E_OPTIONS, readSettings } from '../../bench/freshness-e2e/settings.js';
import { MS_PER_DAY } from '../../src/freshness/index.js';
import {
  createWorld,
  intakeIds,
  mulberry32 as rng,
  simulate,
  WORLDS,
} from '../support/freshness-sim/index.js';
import { startCli } from '../support/queue-helpers.js';
import { e2eSimOptions } from '../support/sim-options.js';

// The worlds of the freshness benchmarks (test/support/freshness-sim/worlds.ts): the simulator's side of each
// (test/support/freshness-sim/world.ts; the sandbox's side is in mock-api-changes.test.ts), and the flags that
// choose them, refused with exit 2 when bad. Benchmarks run from dist/: build first.

const YEAR = 365 * MS_PER_DAY;
const MINUTE = 60_000;

const streams = (seed: number) => ({ random: rng(seed), changes: rng(seed + 1), cards: rng(seed + 2) });

/** The e2e population in the simulator, minutes as days. */
const base = e2eSimOptions;

describe("the simulator's intake world", () => {
  it('brings exactly the share asked, the same subscribers for the same seed', () => {
    const a = intakeIds(10_000, 0.2, 7);
    expect(a.size).toBe(2000);
    expect([...a].every((id) => Number.isInteger(id) && id >= 0 && id < 10_000)).toBe(true);
    expect(intakeIds(10_000, 0.2, 7)).toEqual(a);
    expect(intakeIds(10_000, 0.2, 8)).not.toEqual(a);
    expect(intakeIds(999, 0.2, 1).size).toBe(200);
  });

  it('has 20% of the subscribers arrive at minute 7 and everyone else at the start', () => {
    const world = createWorld(
      base({ subscribers: 5000, intake: { share: 0.2, atDays: 7 / 1440 } }),
      streams(1),
    );
    const at = [...world.arrivesAt];
    expect(at.filter((t) => t === 7 * MINUTE)).toHaveLength(1000);
    expect(at.filter((t) => t === 0)).toHaveLength(4000);
    // The intake draws from a stream of its own: the population and its changes are the base world's.
    const plain = createWorld(base({ subscribers: 5000 }), streams(1));
    expect([...world.trueRate]).toEqual([...plain.trueRate]);
    expect([...world.nextChange]).toEqual([...plain.nextChange]);
  });

  it('counts the newcomers only from their arrival, unsynced until the enqueue reaches them', () => {
    const intake = { share: 0.2, atDays: 7 / 1440 };
    for (const policy of ['round-robin', 'continuous'] as const) {
      const plain = simulate(policy, base());
      const r = simulate(policy, base({ intake }));
      // Minutes 0–6: the same population as without the intake, not 20% more stale.
      expect(Math.abs(r.windows[0]!.staleShare - plain.windows[0]!.staleShare)).toBeLessThan(0.01);
      // Minutes 6–9: they arrive with no copy; the enqueue syncs them within seconds (200 at 15/s).
      expect(r.windows[2]!.staleShare).toBeGreaterThan(plain.windows[2]!.staleShare);
      expect(r.windows[2]!.staleShare).toBeLessThan(plain.windows[2]!.staleShare + 0.1);
    }
  });

  it('registers the newcomers at their arrival, as `cards-sync enqueue` does: counted by the estimate, due at once', () => {
    const intake = { share: 0.2, atDays: 7 / 1440 };
    const newcomers = intakeIds(1000, 0.2, 7);
    const at = 7 * MINUTE;
    let held = { before: 0, at: 0, neverSynced: 0 };
    const claimedAtZero = new Set<number>();
    simulate('continuous', {
      ...base({ intake }),
      // The enqueue goes ahead of the refresh at 15/s: most newcomers are still unsynced at the tick.
      onTick: (now, _params, copies) => {
        if (now !== at - 1000 && now !== at) return;
        let count = 0;
        let neverSynced = 0;
        for (const copy of copies.all()) {
          count += 1;
          if (copy.lastSuccessAt === null) neverSynced += 1;
        }
        if (now < at) held = { ...held, before: count };
        else held = { ...held, at: count, neverSynced };
      },
      onClaim: (c) => {
        if (newcomers.has(c.id) && c.dueAt === 0) claimedAtZero.add(c.id);
      },
    });
    expect(held.before).toBe(800);
    expect(held.at).toBe(1000);
    expect(held.neverSynced).toBe(200 - 15);
    // Their rows are due now (never planned); the operator's syncs took every one first here.
    expect(claimedAtZero.size).toBe(0);
  });
});

describe("the simulator's createDate worlds", () => {
  it('predating: every wallet looks years old at the start; an added card is dated at its change', () => {
    const busy = [{ label: '1/min', share: 1, ratePerDay: 1440 }];
    const world = createWorld(base({ classes: busy, createdDates: 'predating' }), streams(2));
    expect([...world.newestCreated].every((t) => t <= -2 * YEAR && t >= -6 * YEAR)).toBe(true);
    let dated = 0;
    for (let id = 0; id < 1000; id++) {
      world.advance(id, 30 * MINUTE);
      if (world.newestCreated[id]! > 0) dated += 1;
      expect(world.newestCreated[id]!).toBeLessThanOrEqual(30 * MINUTE);
    }
    // 30 changes each, 3 in 8 adding a card: nearly every wallet has a dated card.
    expect(dated).toBeGreaterThan(950);
    const withWallets = createWorld(
      base({
        classes: busy,
        createdDates: 'predating',
        wallets: { minCards: 1, maxCards: 5, kinds: { add: 0.5, remove: 0.25, replace: 0.25 } },
      }),
      streams(2),
    );
    expect([...withWallets.newestCreated].every((t) => t <= -2 * YEAR && t >= -6 * YEAR)).toBe(true);
  });

  it('wallets of 1 to 5 cards stay within them, from the start and through their changes', () => {
    const o = base({
      classes: [{ label: '1/min', share: 1, ratePerDay: 1440 }],
      createdDates: 'from-changes',
      wallets: { minCards: 1, maxCards: 5, kinds: { add: 0.5, remove: 0.25, replace: 0.25 } },
    });
    const world = createWorld(o, streams(3));
    const counts = (w: typeof world) => new Set(Array.from({ length: 1000 }, (_, id) => w.cardsHeld(id)));
    expect([...counts(world)].sort()).toEqual([1, 2, 3, 4, 5]);
    for (let id = 0; id < 1000; id++) world.advance(id, 60 * MINUTE);
    expect([...counts(world)].sort()).toEqual([1, 2, 3, 4, 5]);
  });

  it('changes that are not additions never make a wallet look newer; additions date it at a change', () => {
    const busy = [{ label: '1/min', share: 1, ratePerDay: 1440 }];
    const noAdds = createWorld(
      base({
        classes: busy,
        createdDates: 'from-changes',
        wallets: { minCards: 1, maxCards: 5, kinds: { add: 0, remove: 0.4, replace: 0.6 } },
      }),
      streams(4),
    );
    let older = 0;
    for (let id = 0; id < 1000; id++) {
      const before = noAdds.newestCreated[id]!;
      noAdds.advance(id, 30 * MINUTE);
      expect(noAdds.newestCreated[id]!).toBeLessThanOrEqual(before);
      if (noAdds.newestCreated[id]! < before) older += 1;
    }
    // A removal may take the newest card away: the wallet then looks older than before its change.
    expect(older).toBeGreaterThan(100);
    const onlyAdds = createWorld(
      base({
        classes: busy,
        createdDates: 'from-changes',
        wallets: { minCards: 1, maxCards: 5, kinds: { add: 1, remove: 0, replace: 0 } },
      }),
      streams(4),
    );
    for (let id = 0; id < 1000; id++) {
      const firstChange = onlyAdds.nextChange[id]!;
      onlyAdds.advance(id, 30 * MINUTE);
      expect(onlyAdds.newestCreated[id]!).toBeGreaterThanOrEqual(firstChange);
      expect(onlyAdds.newestCreated[id]!).toBeLessThanOrEqual(30 * MINUTE);
    }
  });
});

describe("the simulator's retune world", () => {
  it('spends the new budget from the retune on, and plans by the new max age at once', () => {
    const retune = { atDays: 4 / 1440, budgetFactor: 0.5, maxAgeFactor: 2 };
    for (const policy of ['round-robin', 'continuous'] as const) {
      const syncsAt: number[] = [];
      const maxAges = new Map<number, number>();
      simulate(policy, {
        ...base({ retune }),
        onSync: ({ at }) => syncsAt.push(at),
        onTick: (now, params) => maxAges.set(now, params.maxAgeDays),
      });
      // 15/s for minutes 0–4, then 7.5/s for minutes 4–9 (within a tick's rounding).
      const before = syncsAt.filter((t) => t < 4 * MINUTE).length;
      const after = syncsAt.filter((t) => t >= 4 * MINUTE).length;
      expect(before / 240).toBeCloseTo(15, 0);
      expect(after / 300).toBeCloseTo(7.5, 0);
      if (policy === 'continuous') {
        expect(maxAges.get(4 * MINUTE - 1000)).toBeCloseTo(5 / 1440, 9);
        expect(maxAges.get(4 * MINUTE)).toBeCloseTo(10 / 1440, 9);
      }
    }
  });

  it('keeps the estimate within 30% of the truth after a retune', () => {
    // Minutes 6–9 learnt and before the retune; 9–12 and 12–15 under half the budget and twice the max age.
    const r = simulate(
      'continuous',
      base({
        days: 15 / 1440,
        windowsFromDays: 6 / 1440,
        retune: { atDays: 9 / 1440, budgetFactor: 0.5, maxAgeFactor: 2 },
      }),
    );
    const error = (w: (typeof r.windows)[number]) => Math.abs(w.estimate! / w.staleShare - 1);
    for (const w of r.windows.slice(1)) {
      // Within 30% of the truth, the target the real runs are held to.
      expect(error(w), JSON.stringify(w)).toBeLessThan(0.3);
    }
    // Half the budget leaves more stale than before.
    expect(r.windows[2]!.staleShare).toBeGreaterThan(r.windows[0]!.staleShare);
  });
});

describe('the worlds by name', () => {
  const defaults = Object.fromEntries(
    Object.entries(E2E_OPTIONS).flatMap(([k, v]) => ('default' in v ? [[k, v.default]] : [])),
  );

  it("--world sets the world's flags, and a flag given beside it wins", () => {
    const s = readSettings({ ...defaults, world: 'small-wallets' });
    expect(s.createdDates).toBe('from-changes');
    expect(s.wallets).toEqual({ minCards: 1, maxCards: 5, kinds: { add: 0.5, remove: 0.25, replace: 0.25 } });
    expect(
      readSettings({ ...defaults, world: 'small-wallets', 'wallet-cards': '2-3' }).wallets,
    ).toMatchObject({
      minCards: 2,
      maxCards: 3,
    });
    expect(readSettings({ ...defaults, world: 'intake' }).intake).toEqual({
      share: 0.2,
      afterMs: 7 * MINUTE,
    });
    // No world: the defaults of before.
    const plain = readSettings(defaults);
    expect(plain.createdDates).toBe('random');
    expect(plain.flags.changes).toBe('0.7:0,0.2:1/h,0.08:12/h,0.02:1/m');
    expect(plain.wallets).toBeUndefined();
    expect(plain.intake).toBeUndefined();
    // Every world's flags are good ones.
    for (const world of Object.keys(WORLDS))
      expect(readSettings({ ...defaults, world, minutes: '20' }).world).toBe(world);
  });

  const bench = (script: string) => new URL(`../../dist-bench/bench/${script}`, import.meta.url).pathname;
  const refusals: [string, string[], string][] = [
    ['freshness-e2e.js', ['--world', 'nope'], '--world takes one of control, createdate'],
    [
      'freshness-e2e.js',
      ['--created-dates', 'sometimes'],
      '--created-dates takes random, from-changes or predating',
    ],
    ['freshness-e2e.js', ['--change-kinds', 'add:0.5'], '--change-kinds: the shares sum to 0.5, not 1'],
    ['freshness-e2e.js', ['--wallet-cards', '1-5'], '--wallet-cards needs --change-kinds'],
    [
      'freshness-e2e.js',
      ['--change-kinds', 'add:1', '--wallet-cards', '0-5'],
      '--wallet-cards takes MIN-MAX',
    ],
    ['freshness-e2e.js', ['--intake', '1.5@7m'], '--intake takes share@after'],
    ['freshness-e2e.js', ['--intake', '0.2@30m', '--minutes', '20'], "arrive after the run's end"],
    [
      'freshness-e2e.js',
      ['--kill-every', '2s'],
      '--kill-every takes a duration from 10s to less than the run',
    ],
    ['freshness-worlds.js', ['--kill-every', '1x'], 'world control: --kill-every takes a duration'],
    ['freshness-e2e.js', ['--retune', 'budget:0,max-age:2@10m'], '--retune takes budget:F,max-age:G@after'],
    [
      'freshness-e2e.js',
      ['--retune', 'budget:0.5@25m', '--minutes', '20'],
      "--retune: the change comes after the run's end",
    ],
    [
      'freshness.js',
      ['--preset', 'e2e', '--retune', 'speed:2@1m'],
      '--retune takes budget:F,max-age:G@after',
    ],
    ['freshness-worlds.js', ['--worlds', 'control,nope'], 'unknown: nope'],
    ['freshness-worlds.js', ['--worlds', 'control,control'], '--worlds takes world names, each once'],
    ['freshness-worlds.js', ['--minutes', '20', '--warmup', '25'], '--warmup < --minutes'],
    [
      'freshness-worlds.js',
      ['--worlds', 'control,intake', '--minutes', '5', '--warmup', '1'],
      "world intake: --intake: the subscribers arrive after the run's end (5 min)",
    ],
    [
      'freshness-worlds.js',
      ['--worlds', 'intake', '--intake-at', '2x'],
      'world intake: --intake takes share@after',
    ],
    ['freshness.js', ['--world', 'nope'], '--world takes one of'],
    ['freshness.js', ['--preset', 'e2e', '--intake', '0.2'], '--intake takes share@after'],
    ['freshness.js', ['--preset', 'e2e', '--wake-up', '0.1:12/x@10m'], '--wake-up takes share:rate@after'],
  ];
  it.each(refusals)('%s %j: exit 2, saying why', async (script, args, message) => {
    const run = await startCli(args, {}, bench(script)).done;
    expect(run.stderr).toContain(message);
    expect(run.code).toBe(2);
  });
});

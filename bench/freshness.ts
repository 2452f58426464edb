import { writeFileSync } from 'node:fs';
import { parseChanges, parseWakeUp } from '../src/mock-api/changes.js';
import { parseCreatedDates } from '../src/mock-api/created-dates.js';
import {
  type BenchPolicy,
  parseIntake,
  parseRetune,
  type RateClass,
  readWallets,
  runAs,
  type SimOptions,
  type SimResult,
  simRetune,
  simulate,
  type WorldFlags,
  worldFlags,
} from '../test/support/freshness-sim/index.js';
import { lineChart } from './chart.js';
import { rateClasses } from './freshness-e2e/forecast.js';
import { parseFlags } from './harness.js';

// npm run bench:freshness [-- --subscribers 20000 --days 30 --budget-share 0.25 --max-age 7]
// Four policies on one population at one budget, 30 simulated days, through the real policy code.
// --policies adds the class learner (`class-learner`: the continuous policy given the world's
// true mixture of rates, a bound between it and the oracle; test/support/freshness-sim/plan.ts).
// npm run bench:freshness -- --preset e2e: the population, budget and max age of
// bench:freshness-e2e (10,000 subscribers, 150/s, max age 5 min, 20 min, figures after minute 5).
// The world flags are bench:freshness-e2e's, so that a forecast and a real run model the same
// world: --world NAME (test/support/freshness-sim/worlds.ts), or --changes, --created-dates, --wake-up,
// --change-kinds, --wallet-cards, --intake (a flag given beside --world wins). The e2e preset
// sets the class learner beside the oracle.

const { values } = parseFlags({
  options: {
    preset: { type: 'string' },
    subscribers: { type: 'string' },
    days: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '14' },
    'budget-share': { type: 'string', default: '0.25' },
    /** --preset e2e: requests a second (bench:freshness-e2e's default, 150, or the world's). */
    budget: { type: 'string' },
    'max-age': { type: 'string', default: '7' },
    'audit-share': { type: 'string', default: '0.02' },
    seed: { type: 'string', default: '7' },
    /** A world of test/support/freshness-sim/worlds.ts: its flags, unless given beside it. */
    world: { type: 'string' },
    /** Classes and rates as bench:freshness-e2e takes them; default the population below (or E2E_POPULATION). */
    changes: { type: 'string' },
    'created-dates': { type: 'string' },
    /** `share:rate` (from halfway) or `share:rate@after`, as bench:freshness-e2e takes it. */
    'wake-up': { type: 'string' },
    'change-kinds': { type: 'string' },
    'wallet-cards': { type: 'string' },
    /** `share@after`: that share of the subscribers arrive then, unsynced. */
    intake: { type: 'string' },
    /** `budget:F,max-age:G@after`: the budget × F and the max age × G from then on. */
    retune: { type: 'string' },
    forget: { type: 'string' },
    'change-point': { type: 'string' },
    explore: { type: 'boolean', default: false },
    evidence: { type: 'string', default: 'on' },
    chart: { type: 'string' },
    policies: { type: 'string' },
  },
});

/** The population: most wallets never change in a month; a few change daily. */
export const POPULATION: RateClass[] = [
  { label: 'never', share: 0.7, ratePerDay: 0 },
  { label: 'yearly', share: 0.15, ratePerDay: 1 / 365 },
  { label: 'monthly', share: 0.08, ratePerDay: 1 / 30 },
  { label: 'weekly', share: 0.04, ratePerDay: 1 / 7 },
  { label: 'every 2 days', share: 0.02, ratePerDay: 1 / 2 },
  { label: 'daily', share: 0.01, ratePerDay: 1 },
];

/** bench:freshness-e2e's `--changes` default: 70% never, 20% 1/h, 8% 12/h, 2% 1/min. */
export const E2E_POPULATION: RateClass[] = [
  { label: 'never', share: 0.7, ratePerDay: 0 },
  { label: '1/h', share: 0.2, ratePerDay: 24 },
  { label: '12/h', share: 0.08, ratePerDay: 288 },
  { label: '1/min', share: 0.02, ratePerDay: 1440 },
];

const e2e = values.preset === 'e2e';
if (values.preset !== undefined && !e2e) {
  console.error('--preset takes e2e (the population and budget of bench:freshness-e2e)');
  process.exit(2);
}
/** The world: `--world`'s flags, those given beside it winning. */
const world: WorldFlags = {
  ...worldFlags(values.world),
  ...Object.fromEntries(
    (
      [
        'subscribers',
        'budget',
        'changes',
        'created-dates',
        'wake-up',
        'change-kinds',
        'wallet-cards',
        'intake',
        'retune',
      ] as const
    )
      .filter((k) => values[k] !== undefined)
      .map((k) => [k, values[k]]),
  ),
};
/** A world flag read by `parse`, or a one-line refusal (exit 2). */
function checked<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    console.error((error as Error).message);
    process.exit(2);
  }
}
const createdDates = checked(() => parseCreatedDates(world['created-dates'] ?? 'random'));
const classes =
  world.changes === undefined ? undefined : checked(() => rateClasses(parseChanges(world.changes!)));
const wallets = checked(() => readWallets(world));
const intake = world.intake === undefined ? undefined : checked(() => parseIntake(world.intake!));
const retune = world.retune === undefined ? undefined : checked(() => parseRetune(world.retune!));
// --wake-up 0.1:1/d: that share of the wallets that never change start changing, halfway, at that
// rate; 0.1:12/h@10m (as bench:freshness-e2e takes it): from then on.
const PER_DAY: Record<string, number> = { m: 1440, h: 24, d: 1 };
const wakeSpec = world['wake-up'];
const wakeAt = wakeSpec?.includes('@') ? checked(() => parseWakeUp(wakeSpec)) : undefined;
const wake = wakeSpec && !wakeAt ? /^(\d*\.?\d+):(\d*\.?\d+)\/([mhd])$/.exec(wakeSpec) : null;
if (wakeSpec && !wakeAt && !wake) {
  console.error(
    '--wake-up takes share:rate, e.g. 0.1:1/d or 0.1:12/h (a tenth of the quiet wallets, from halfway), or share:rate@after (0.1:12/h@10m)',
  );
  process.exit(2);
}
/** The unit figures are printed in: days, or minutes in the e2e preset. */
const unit = e2e ? { name: 'min', days: 1 / 1440 } : { name: 'd', days: 1 };
const n = Number(world.subscribers ?? (e2e ? 10_000 : 20_000));
const days = e2e ? 20 / 1440 : Number(values.days);
const options: SimOptions = {
  subscribers: n,
  classes: classes ?? (e2e ? E2E_POPULATION : POPULATION),
  budgetPerDay: e2e ? Number(world.budget ?? 150) * 86_400 : Number(values['budget-share']) * n,
  days,
  warmupDays: e2e ? 5 / 1440 : Number(values.warmup),
  maxAgeDays: e2e ? 5 / 1440 : Number(values['max-age']),
  auditShare: Number(values['audit-share']),
  seed: Number(values.seed),
  createdDates,
  evidence: values.evidence !== 'off',
  ...(e2e ? { tickSeconds: 1, replanSeconds: 60, snapshotSeconds: 10, windowsFromDays: 5 / 1440 } : {}),
  ...(values.forget !== undefined ? { forgetMaxAges: Number(values.forget) } : {}),
  ...(values.explore ? { explore: true } : {}),
  ...(values['change-point'] !== undefined ? { changePointHazard: Number(values['change-point']) } : {}),
  ...(wake
    ? {
        wakeUp: {
          share: Number(wake[1]),
          ratePerDay: Number(wake[2]) * PER_DAY[wake[3]!]!,
          atDays: days / 2,
        },
      }
    : {}),
  ...(wakeAt
    ? {
        wakeUp: {
          share: wakeAt.share,
          ratePerDay: wakeAt.perSecond * 86_400,
          atDays: wakeAt.afterMs / 86_400_000,
        },
      }
    : {}),
  ...(wallets ? { wallets } : {}),
  ...(intake ? { intake: { share: intake.share, atDays: intake.afterMs / 86_400_000 } } : {}),
  // The e2e preset plans every fifth of the max age, as the real refresh does.
  ...(retune ? { retune: simRetune(retune, e2e ? { replanSeconds: 60 * retune.maxAgeFactor } : {}) } : {}),
};
if (retune && retune.afterMs >= days * 86_400_000) {
  console.error('--retune: the change comes after the run ends; make it earlier');
  process.exit(2);
}
if (intake && intake.afterMs >= days * 86_400_000) {
  console.error('--intake: the subscribers arrive after the run ends; make it earlier');
  process.exit(2);
}
const at = (d: number) => `${+(d / unit.days).toFixed(2)} ${unit.name}`;
const policies = (
  values.policies ??
  (e2e
    ? 'round-robin,continuous,class-learner,oracle'
    : 'nightly-id-order,round-robin,nightly-by-estimate,continuous,oracle')
).split(',') as BenchPolicy[];
const results: SimResult[] = [];
for (const p of policies) {
  const started = performance.now();
  const run = runAs(p, options);
  results.push({ ...simulate(run.policy, run.options), policy: p });
  console.error(`${p}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
const rr = results.find((r) => r.policy === 'round-robin') ?? results[0]!;
const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
console.log(
  `${n} subscribers, budget ${e2e ? `${world.budget ?? 150}/s` : `${options.budgetPerDay}/day (${values['budget-share']} of N)`}, ` +
    `max age ${at(options.maxAgeDays)}, ${at(options.days)} (figures after ${at(options.warmupDays)}), ` +
    `seed ${options.seed}, createDates ${createdDates}${values.world ? `, world ${values.world}` : ''}` +
    `${options.evidence ? '' : ', evidence off'}${options.forgetMaxAges !== undefined ? `, forget ${options.forgetMaxAges} max ages` : ''}` +
    `${options.changePointHazard !== undefined ? `, change-point hazard ${options.changePointHazard}` : ''}${options.explore ? ', explore (Thompson)' : ''}` +
    `${options.wakeUp ? `, wake-up ${wakeSpec} at ${at(options.wakeUp.atDays)}` : ''}` +
    `${wallets ? `, change kinds ${world['change-kinds']} in wallets of ${wallets.minCards}–${wallets.maxCards} cards` : ''}` +
    `${intake ? `, intake ${world.intake}` : ''}${retune ? `, retune ${world.retune}` : ''}`,
);
console.log(`population: ${options.classes.map((c) => `${c.share * 100}% ${c.label}`).join(', ')}`);
console.log('| policy | stale share | × round robin | mean age of stale copies | largest age | syncs |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const r of results) {
  console.log(
    `| ${r.policy} | ${pct(r.staleShare)} | ${(r.staleShare / rr.staleShare).toFixed(2)} | ${at(r.meanStaleAgeDays)} | ${at(r.maxAgeDays)} | ${r.syncs} |`,
  );
}
const oracle = results.find((r) => r.policy === 'oracle');
console.log(`\n| policy | ${rr.windows.map((w) => `${at(w.fromDays)}–${at(w.toDays)}`).join(' | ')} |`);
console.log(`|---|${rr.windows.map(() => '---:').join('|')}|`);
for (const r of results) {
  const cells = r.windows.map((w, i) => {
    const vsRr = w.staleShare / rr.windows[i]!.staleShare;
    const vsOracle = oracle ? ` / ${(w.staleShare / oracle.windows[i]!.staleShare).toFixed(2)}× oracle` : '';
    return `${pct(w.staleShare)} (${vsRr.toFixed(2)}× rr${vsOracle})`;
  });
  console.log(`| ${r.policy} | ${cells.join(' | ')} |`);
}
for (const r of results) {
  if (!r.wakeUp) continue;
  const w = r.wakeUp;
  console.log(
    `wake-up (${r.policy}, ${w.woken} woken): stale share by max age after waking ${w.byMaxAge.map(pct).join(', ')}; ` +
      `wallets always at that rate ${pct(w.steadyState)}`,
  );
}
if (values.chart) {
  const colors: Record<string, string> = {
    'round-robin': '#d62728',
    continuous: '#1f77b4',
    'class-learner': '#9467bd',
    oracle: '#7f7f7f',
  };
  const svg = lineChart(
    `Stale share by window (simulator, ${n} subscribers${e2e ? `, ${world.budget ?? 150}/s` : ''})`,
    rr.windows.map((w) => `${at(w.fromDays)}–${at(w.toDays)}`),
    'stale share (%)',
    results.map((r) => ({
      name: r.policy,
      color: colors[r.policy] ?? '#2ca02c',
      values: r.windows.map((w) => w.staleShare * 100),
    })),
    'window of the run',
  );
  writeFileSync(values.chart, svg);
  console.error(`chart: ${values.chart}`);
}
const c = results.find((r) => r.policy === 'continuous');
// The class learner's estimate too: what the estimate would be with the true mixture.
for (const r of results) {
  if (!r.estimateError) continue;
  const e = r.estimateError;
  console.log(
    `${r === c ? '\n' : ''}estimate (${r.policy}, snapshots after warm-up): mean ${pct(e.meanEstimate)} against a true ${pct(e.meanTruth)}; mean |error| ${(e.meanAbs * 100).toFixed(2)} points`,
  );
}
if (c?.windows.every((w) => w.estimate !== undefined)) {
  const signed = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(0)}%`;
  console.log(
    `estimate (continuous) by window: ${c.windows
      .map(
        (w) =>
          `${at(w.fromDays)}–${at(w.toDays)} ${pct(w.estimate!)} against ${pct(w.staleShare)} (${signed(w.estimate! / Math.max(1e-12, w.staleShare) - 1)})`,
      )
      .join(', ')}`,
  );
}
if (!c) process.exit(0);
if (c.audit) {
  const a = c.audit;
  console.log(
    `audit (last max age, ${a.samples} samples): ${pct(a.ratio)} [${pct(a.low)}, ${pct(a.high)}]; at the end the truth is ${pct(a.truthAtEnd)}, the estimate ${pct(a.estimateAtEnd)}`,
  );
}
console.log(
  `max age kept: continuous ${c.keepsMaxAge}, largest age ${at(c.maxAgeDays)} ≤ ${at(options.maxAgeDays)}`,
);

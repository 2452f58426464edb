import {
  type PolicyName,
  type RateClass,
  type SimOptions,
  type SimResult,
  simulate,
} from './freshness/sim.js';
import { parseFlags } from './harness.js';

// npm run bench:freshness [-- --subscribers 20000 --days 30 --budget-share 0.25 --max-age 7]
// Four policies on one population at one budget, 30 simulated days, through the real policy code.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '20000' },
    days: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '14' },
    'budget-share': { type: 'string', default: '0.25' },
    'max-age': { type: 'string', default: '7' },
    'audit-share': { type: 'string', default: '0.02' },
    seed: { type: 'string', default: '7' },
    'created-dates': { type: 'string', default: 'random' },
    'wake-up': { type: 'string' },
    forget: { type: 'string' },
    evidence: { type: 'string', default: 'on' },
    policies: {
      type: 'string',
      default: 'nightly-id-order,round-robin,nightly-by-estimate,continuous,oracle',
    },
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

const n = Number(values.subscribers);
const createdDates = values['created-dates'];
if (createdDates !== 'random' && createdDates !== 'from-changes') {
  console.error('--created-dates takes random (the control) or from-changes');
  process.exit(2);
}
// --wake-up 0.1:1/d: that share of the wallets that never change start changing, halfway, at that rate.
const wake = values['wake-up'] ? /^(\d*\.?\d+):(\d*\.?\d+)\/d$/.exec(values['wake-up']) : null;
if (values['wake-up'] && !wake) {
  console.error(
    '--wake-up takes share:rate, e.g. 0.1:1/d (a tenth of the quiet wallets, daily, from halfway)',
  );
  process.exit(2);
}
const options: SimOptions = {
  subscribers: n,
  classes: POPULATION,
  budgetPerDay: Number(values['budget-share']) * n,
  days: Number(values.days),
  warmupDays: Number(values.warmup),
  maxAgeDays: Number(values['max-age']),
  auditShare: Number(values['audit-share']),
  seed: Number(values.seed),
  createdDates,
  evidence: values.evidence !== 'off',
  ...(values.forget !== undefined ? { forgetMaxAges: Number(values.forget) } : {}),
  ...(wake
    ? { wakeUp: { share: Number(wake[1]), ratePerDay: Number(wake[2]), atDays: Number(values.days) / 2 } }
    : {}),
};
const policies = values.policies!.split(',') as PolicyName[];
const results: SimResult[] = [];
for (const p of policies) {
  const started = performance.now();
  results.push(simulate(p, options));
  console.error(`${p}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
const rr = results.find((r) => r.policy === 'round-robin') ?? results[0]!;
const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
console.log(
  `${n} subscribers, budget ${options.budgetPerDay}/day (${values['budget-share']} of N), max age ${options.maxAgeDays} d, ` +
    `${options.days} days (figures after day ${options.warmupDays}), seed ${options.seed}, createDates ${createdDates}` +
    `${options.evidence ? '' : ', evidence off'}${options.forgetMaxAges !== undefined ? `, forget ${options.forgetMaxAges} max ages` : ''}` +
    `${options.wakeUp ? `, wake-up ${values['wake-up']} at day ${options.wakeUp.atDays}` : ''}`,
);
console.log(`population: ${POPULATION.map((c) => `${c.share * 100}% ${c.label}`).join(', ')}`);
console.log('| policy | stale share | × round robin | mean age of stale copies | largest age | syncs |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const r of results) {
  console.log(
    `| ${r.policy} | ${pct(r.staleShare)} | ${(r.staleShare / rr.staleShare).toFixed(2)} | ${r.meanStaleAgeDays.toFixed(2)} d | ${r.maxAgeDays.toFixed(2)} d | ${r.syncs} |`,
  );
}
const oracle = results.find((r) => r.policy === 'oracle');
console.log(
  '\n| policy | ' +
    rr.windows.map((w) => `days ${w.fromDays.toFixed(0)}–${w.toDays.toFixed(0)}`).join(' | ') +
    ' |',
);
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
const c = results.find((r) => r.policy === 'continuous');
if (!c) process.exit(0);
if (c.estimateError) {
  const e = c.estimateError;
  console.log(
    `\nestimate (continuous, hourly after warm-up): mean ${pct(e.meanEstimate)} against a true ${pct(e.meanTruth)}; mean |error| ${(e.meanAbs * 100).toFixed(2)} points`,
  );
}
if (c.audit) {
  const a = c.audit;
  console.log(
    `audit (last max age, ${a.samples} samples): ${pct(a.ratio)} [${pct(a.low)}, ${pct(a.high)}]; at the end the truth is ${pct(a.truthAtEnd)}, the estimate ${pct(a.estimateAtEnd)}`,
  );
}
console.log(
  `max age kept: continuous ${c.keepsMaxAge}, largest age ${c.maxAgeDays.toFixed(2)} d ≤ ${options.maxAgeDays} d`,
);

import { type PolicyName, type RateClass, type SimResult, simulate } from './freshness/sim.js';
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
const options = {
  subscribers: n,
  classes: POPULATION,
  budgetPerDay: Number(values['budget-share']) * n,
  days: Number(values.days),
  warmupDays: Number(values.warmup),
  maxAgeDays: Number(values['max-age']),
  auditShare: Number(values['audit-share']),
  seed: Number(values.seed),
};
const policies: PolicyName[] = [
  'nightly-id-order',
  'round-robin',
  'nightly-by-estimate',
  'continuous',
  'oracle',
];
const results: SimResult[] = [];
for (const p of policies) {
  const started = performance.now();
  results.push(simulate(p, options));
  console.error(`${p}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
const rr = results.find((r) => r.policy === 'round-robin')!;
const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
console.log(
  `${n} subscribers, budget ${options.budgetPerDay}/day (${values['budget-share']} of N), max age ${options.maxAgeDays} d, ` +
    `${options.days} days (figures after day ${options.warmupDays}), seed ${options.seed}`,
);
console.log(`population: ${POPULATION.map((c) => `${c.share * 100}% ${c.label}`).join(', ')}`);
console.log('| policy | stale share | × round robin | mean age of stale copies | largest age | syncs |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const r of results) {
  console.log(
    `| ${r.policy} | ${pct(r.staleShare)} | ${(r.staleShare / rr.staleShare).toFixed(2)} | ${r.meanStaleAgeDays.toFixed(2)} d | ${r.maxAgeDays.toFixed(2)} d | ${r.syncs} |`,
  );
}
const c = results.find((r) => r.policy === 'continuous')!;
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

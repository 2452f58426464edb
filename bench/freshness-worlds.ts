import { writeFileSync } from 'node:fs';
import { WORLDS } from '../test/support/freshness-sim/index.js';
import {
  printReport,
  type WorldSummary,
  worldSummary,
  worldsTable,
  writeWorldsChart,
} from './freshness-e2e/report.js';
import { runE2e } from './freshness-e2e/run.js';
import { E2E_OPTIONS, readSettings, type Settings } from './freshness-e2e/settings.js';
import { parseFlags } from './harness.js';

// npm run bench:freshness-worlds -- --minutes 20 --warmup 5 [--worlds control,createdate,intake
//   --subscribers 10000 --budget 150 --max-age 5m --intake-at 7m --retune-at 10m --out bench/freshness-worlds.md
//   --chart bench/freshness-worlds.svg --kill-every 1m]
//
// bench:freshness-e2e in every world of test/support/freshness-sim/worlds.ts (or those of `--worlds`), one
// after the other, each against its own sandbox and databases, then ONE table (written to `--out`
// and printed last) and ONE chart: continuous against round robin by window, real against the
// simulator's forecast for the same world, so that a change to the policy is judged in one run.
// Each world's full report is printed as it ends. The run's flags (all but the world's own) are
// bench:freshness-e2e's and go to every world.

const { subscribers, minutes, warmup, budget, sample, seed } = E2E_OPTIONS;
const { values } = parseFlags({
  options: {
    subscribers,
    minutes,
    warmup,
    budget,
    'max-age': E2E_OPTIONS['max-age'],
    'audit-share': E2E_OPTIONS['audit-share'],
    sample,
    seed,
    'redis-url': E2E_OPTIONS['redis-url'],
    'kill-every': E2E_OPTIONS['kill-every'],
    /** The worlds to run, in this order (default: all, in the order of test/support/freshness-sim/worlds.ts). */
    worlds: { type: 'string', default: Object.keys(WORLDS).join(',') },
    /** When the intake world's subscribers arrive, instead of its own minute 7 (for shorter runs). */
    'intake-at': { type: 'string' },
    /** When the retune world's workers are restarted, instead of its own minute 10. */
    'retune-at': { type: 'string' },
    out: { type: 'string', default: 'bench/freshness-worlds.md' },
    chart: { type: 'string', default: 'bench/freshness-worlds.svg' },
  },
});

const names = values.worlds.split(',').map((w) => w.trim());
const unknown = names.filter((w) => !(w in WORLDS));
if (names.length === 0 || unknown.length > 0 || new Set(names).size !== names.length) {
  console.error(
    `--worlds takes world names, each once, comma-separated, of ${Object.keys(WORLDS).join(', ')}` +
      (unknown.length > 0 ? `; unknown: ${unknown.join(', ')}` : ''),
  );
  process.exit(2);
}
const { worlds: _worlds, 'intake-at': intakeAt, 'retune-at': retuneAt, out, chart, ...run } = values;
/** The world's flags as given to it: the run's, and `--intake-at` moving an intake, `--retune-at` a retune. */
const flagsOf = (world: string) => {
  const { intake, retune } = WORLDS[world]!.flags;
  return {
    ...run,
    world,
    ...(intake && intakeAt !== undefined ? { intake: intake.replace(/@.*/, `@${intakeAt}`) } : {}),
    ...(retune && retuneAt !== undefined ? { retune: retune.replace(/@.*/, `@${retuneAt}`) } : {}),
  };
};
// Every world's settings checked before the first run starts: a bad flag costs no run.
const planned: [string, Settings][] = names.map((world) => [
  world,
  readSettings(flagsOf(world), `world ${world}: `),
]);
const minutesEach = Number(values.minutes) + 0.5;
console.error(
  `${names.length} worlds, about ${(names.length * minutesEach).toFixed(0)} min: ${names.join(', ')}`,
);

const summaries: WorldSummary[] = [];
const failed: string[] = [];
for (const [world, settings] of planned) {
  console.log(`\n## ${world}: ${WORLDS[world]!.about}\n`);
  try {
    const { record, contCounts, rrCounts, sim } = await runE2e(settings);
    printReport(record, contCounts, rrCounts, sim);
    summaries.push(worldSummary(world, record, contCounts, sim));
  } catch (error) {
    console.error(`world ${world} failed: ${(error as Error).message}`);
    failed.push(world);
  }
}

const first = planned[0]![1];
const table = [
  `# bench:freshness-worlds, ${new Date().toISOString().slice(0, 16)}Z`,
  '',
  `\`npm run bench:freshness-worlds -- ${process.argv.slice(2).join(' ')}\`: ${first.subscribers} subscribers, ` +
    `${first.budget} requests/s, max age ${first.flags.maxAge}, ${first.minutes} min, figures from minute ${first.warmupMin}, seed ${first.seed}.`,
  '',
  ...worldsTable(summaries),
  '',
  'Stale share against the sandbox, continuous × round robin (rr) at the same request rate; by window, the real',
  "ratio / the simulator's forecast for the same world and window (gap: real ÷ forecast − 1); the estimate",
  "(`status`) against the truth, relative and in share points, by window; the continuous set-up's oldest copy; nobody past max age:",
  '`status` counted nobody past it and the oldest copy was within it; successful syncs a second against the budget.',
  ...(summaries.some((s) => s.kills !== undefined)
    ? [
        `Under \`--kill-every ${first.flags.killEvery}\` the continuous set-up ran two workers and the one holding the lease`,
        'was killed with SIGKILL that often and replaced at once; the forecast knows nothing of the kills.',
      ]
    : []),
  '',
  ...summaries.map((s) => `- **${s.world}**: ${WORLDS[s.world]!.about} (${s.about})`),
  ...(failed.length > 0 ? ['', `Failed: ${failed.join(', ')} (see the log).`] : []),
];
console.log(`\n${table.join('\n')}`);
writeFileSync(out, `${table.join('\n')}\n`);
console.error(`table: ${out}`);
if (chart) writeWorldsChart(chart, summaries);
if (failed.length > 0) process.exitCode = 1;

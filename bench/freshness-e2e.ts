import { printReport, writeChart } from './freshness-e2e/report.js';
import { runE2e } from './freshness-e2e/run.js';
import { E2E_OPTIONS, readSettings } from './freshness-e2e/settings.js';
import { parseFlags } from './harness.js';

// npm run bench:freshness-e2e [-- --subscribers 10000 --minutes 15 --warmup 5 --budget 150 --max-age 5m
//   --world NAME | --family SEED:I | --changes SPEC --created-dates random|from-changes|predating --wake-up 0.1:12/h@10m
//   --change-kinds add:0.5,remove:0.25,replace:0.25 --wallet-cards 1-5 --intake 0.2@7m
//   --kill-every 1m]
//
// The end-to-end freshness run: real workers (`cards-sync worker`, as a user starts it) against the
// sandbox, whose wallets change over wall time at the rates of `--changes`. Two set-ups side by
// side, each with its own database, queue and sandbox, the same population and the same changes
// at the same moments: REFRESH_MODE=continuous, and uniform round robin at the same request rate
// (this harness enqueues every subscriber in id order, over and over, for a worker in nightly mode
// whose cron does not fire). Every `--sample` the stored cards are compared with the sandbox's
// truth; the stale share is the share of subscribers whose copy differs. What an oracle that knew
// every rate would reach comes from the simulator (test/support/freshness-sim/sim.ts) on the same population.
// `--world` names a world of test/support/freshness-sim/worlds.ts (bench:freshness-worlds runs them all);
// `--family SEED:I` makes world I of bench:freshness-family's family of SEED, compressed in time.
//
// This file reads the flags and prints; the flags are checked in bench/freshness-e2e/settings.ts,
// the run made in run.ts, the samples taken in measure.ts, the simulator's forecast made in
// forecast.ts, and the tables and chart printed in report.ts.

const { values } = parseFlags({
  options: { ...E2E_OPTIONS, chart: { type: 'string', default: 'bench/freshness-e2e.svg' } },
});

const settings = readSettings(values);
const { record, contCounts, rrCounts, sim } = await runE2e(settings);
printReport(record, contCounts, rrCounts, sim);
if (settings.flags.chart) writeChart(settings.flags.chart, record, sim.oracle);

import { resetDatabase, startRawApi } from './harness.js';
import { curve } from './run-curve.js';
import { round } from './run-figures.js';
import { runFlags } from './run-flags.js';
import { KEY, runPipeline } from './run-pipeline.js';
import { printSummary, printTables, type RoundResult } from './run-report.js';

// npm run bench [-- --subscribers 20000 --cards 5 --concurrency 64]
//   The pipelines (r, the raw ceiling; a, b, c, c unchanged; f, the floor) over the same data, in
//   one run on one machine, all against one API process (bench/raw-api.ts); the ratios are what
//   counts. Nothing else may write to the Postgres server during a run: WAL is counted cluster-wide.
// npm run bench -- --curve [5000,10000,20000,40000,80000] [--chart bench/curve.svg]
//   cards-sync alone at growing sizes: is the cost per subscriber flat?

const flags = runFlags();
const { values, n, rounds, k, databaseUrl } = flags;

const PIPELINES = [
  // [name, fresh database]; r first in every round: the ceiling every other pipeline is held to.
  ['r-raw', true],
  ['a-ceiling', true],
  ['b-naive', true],
  ['c-cards-sync', true],
  ['c-cards-sync-unchanged', false],
  ['f-floor', true],
] as const;

async function main() {
  const sizes =
    values.curve === undefined ? [] : (values.curve || '5000,10000,20000,40000,80000').split(',').map(Number);
  const api = await startRawApi(KEY, k, Math.max(n, ...sizes));
  if (values.curve !== undefined) {
    console.log(
      `cards-sync scaling curve: ${sizes.join(', ')} subscribers x ${k} cards, concurrency ${values.concurrency}`,
    );
    try {
      await curve(flags, api, sizes);
    } finally {
      api.child.kill('SIGTERM');
    }
    return;
  }
  console.log(
    `cards-sync benchmark: ${n} subscribers x ${k} cards, concurrency ${values.concurrency}, API ${api.url}`,
  );
  const results: RoundResult[] = [];
  try {
    const only = values.only?.split(',');
    for (let pass = 1; pass <= rounds; pass++) {
      if (rounds > 1) console.log(`  round ${pass} of ${rounds}`);
      for (const [name, fresh] of PIPELINES) {
        if (only && !only.includes(name.slice(0, 1))) continue;
        // b is six to eight times slower than c and far from its target: measured once.
        if (name === 'b-naive' && pass > 1) continue;
        if (fresh) await resetDatabase(databaseUrl);
        const r = await runPipeline(flags, name, api);
        results.push({ ...r, round: pass });
        console.log(`  ${name.padEnd(24)} ${round(r.subscribersPerSec)} subscribers/s`);
      }
    }
  } finally {
    api.child.kill('SIGTERM');
  }
  printTables(results);
  printSummary(flags, results);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);

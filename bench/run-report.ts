import { median, round } from './run-figures.js';
import type { RunFlags } from './run-flags.js';
import type { Result, Rows } from './run-pipeline.js';

// What bench/run.ts prints once every pipeline has run: a table per measure, the ratios, the JSON line.

/** One pipeline's result in one round. */
export type RoundResult = Result & { round: number };

/** Rows per sync of several rounds of one pipeline, each figure the median over the rounds. */
function medianRows(of: readonly Result[]): Rows {
  const out: Rows = {};
  const tables = [...new Set(of.flatMap((r) => Object.keys(r.rowsPerSync)))].sort();
  for (const t of tables) {
    const m = (f: 'ins' | 'upd' | 'hot' | 'del') => median(of.map((r) => r.rowsPerSync[t]?.[f] ?? 0)) ?? 0;
    out[t] = { ins: m('ins'), upd: m('upd'), hot: m('hot'), del: m('del') };
  }
  return out;
}

const RATIOS = [
  'a_over_r',
  'c_over_r',
  'unchanged_over_r',
  'f_over_r',
  'c_over_a',
  'c_over_b',
  'unchanged_over_first',
  'f_over_a',
] as const;

/** The tables of every result: speed, memory and CPU; WAL, reads and rows; cards-sync's WAL by relation. */
export function printTables(results: readonly RoundResult[]): void {
  console.log(
    '\npipeline                  round   subs/s   cards/s   p50 ms  p99 ms  peak RSS MB  Redis peak MB   CPU ms/subscriber: worker  API  Redis  Postgres',
  );
  for (const r of results) {
    console.log(
      `${r.pipeline.padEnd(24)} ${String(r.round).padStart(6)} ${String(round(r.subscribersPerSec)).padStart(8)} ${String(round(r.cardsPerSec)).padStart(9)} ` +
        `${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(7)} ${String(round(r.peakRssMB, 1)).padStart(12)} ${String(round(r.redisPeakMB ?? 0, 1)).padStart(14)}` +
        `   ${[r.cpuMsPerSubscriber?.worker, r.cpuMsPerSubscriber?.api, r.cpuMsPerSubscriber?.redis, r.cpuMsPerSubscriber?.postgres].map((x) => String(x ?? '').padStart(6)).join(' ')}`,
    );
  }
  console.log(
    '\npipeline                  round  WAL B/sync  bench db B/sync  of which FPI  other B/sync  saved_cards read/sync (seq, idx scans)  rows/sync: ins/upd/hot/del by table',
  );
  for (const r of results) {
    const rows = Object.entries(r.rowsPerSync)
      .map(([t, x]) => `${t} ${x.ins}/${x.upd}/${x.hot}/${x.del}`)
      .join(', ');
    console.log(
      `${r.pipeline.padEnd(24)} ${String(r.round).padStart(6)} ${String(round(r.walBytesPerSync)).padStart(11)} ` +
        `${String(r.walBenchDbBytesPerSync === null ? '' : round(r.walBenchDbBytesPerSync)).padStart(16)} ` +
        `${String(r.walFpiBytesPerSync === null ? '' : round(r.walFpiBytesPerSync)).padStart(13)} ` +
        `${String(r.walOtherBytesPerSync === null ? '' : round(r.walOtherBytesPerSync)).padStart(13)} ` +
        `${`${r.savedCardsReadPerSync} (${r.savedCardsScansPerSync.seq}, ${r.savedCardsScansPerSync.idx})`.padStart(39)}  ${rows}`,
    );
  }
  // Where each sync's WAL goes, for cards-sync's pipelines in the first round.
  for (const r of results.filter(
    (x) => x.round === 1 && x.pipeline.startsWith('c') && x.walByRelationPerSync,
  )) {
    console.log(`\nWAL per sync by relation, ${r.pipeline} (bytes, of which full-page images):`);
    for (const [what, b] of Object.entries(r.walByRelationPerSync!)) {
      console.log(`  ${what.padEnd(40)} ${String(b.bytes).padStart(8)} ${String(b.fpi).padStart(8)}`);
    }
  }
}

/** The ratios of each round and their medians as a table, then the run summed up in one JSON line. */
export function printSummary(flags: RunFlags, results: readonly RoundResult[]): void {
  const { n, k, rounds } = flags;
  const ratio = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? null : round(x / y, 3);
  const perRound = Array.from({ length: rounds }, (_, i) => {
    const by = (name: string) =>
      results.find((r) => r.pipeline === name && r.round === i + 1)?.subscribersPerSec;
    // b was measured in the first round only; later rounds compare c with it too.
    const b = results.find((r) => r.pipeline === 'b-naive')?.subscribersPerSec;
    const [r, a, c, c2, f] = ['r-raw', 'a-ceiling', 'c-cards-sync', 'c-cards-sync-unchanged', 'f-floor'].map(
      by,
    );
    return {
      round: i + 1,
      a_over_r: ratio(a, r),
      c_over_r: ratio(c, r),
      unchanged_over_r: ratio(c2, r),
      f_over_r: ratio(f, r),
      c_over_a: ratio(c, a),
      c_over_b: ratio(c, b),
      unchanged_over_first: ratio(c2, c),
      f_over_a: ratio(f, a),
    };
  });
  const medians = Object.fromEntries(
    RATIOS.map((key) => [key, median(perRound.map((r) => r[key]))]),
  ) as Record<(typeof RATIOS)[number], number | null>;
  console.log(`\nround ${RATIOS.map((key) => key.padStart(Math.max(9, key.length))).join(' ')}`);
  for (const r of [...perRound, { round: 'median', ...medians }]) {
    console.log(
      `${String(r.round).padStart(5)} ${RATIOS.map((key) => String(r[key] ?? '').padStart(Math.max(9, key.length))).join(' ')}`,
    );
  }
  const of = (name: string) => results.filter((r) => r.pipeline === name);
  const first = of('c-cards-sync');
  const unchanged = of('c-cards-sync-unchanged');
  console.log(
    JSON.stringify({
      subscribers: n,
      cardsPerSubscriber: k,
      rounds,
      results,
      perRound,
      // Medians over the rounds. r is the raw ceiling: a bare BullMQ worker fetching with undici.
      ...medians,
      // WAL per sync, the cluster's (LSN difference) and the bench database's images among it.
      walBytesPerFirstSync: median(first.map((r) => r.walBytesPerSync)),
      walBytesPerUnchangedSync: median(unchanged.map((r) => r.walBytesPerSync)),
      // The same from the bench database's own records (pg_walinspect): what to read when anything
      // else wrote to the server meanwhile (walOtherBytesPerSync of each result above 0).
      walBenchDbBytesPerFirstSync: median(first.map((r) => r.walBenchDbBytesPerSync)),
      walBenchDbBytesPerUnchangedSync: median(unchanged.map((r) => r.walBenchDbBytesPerSync)),
      walFpiBytesPerFirstSync: median(first.map((r) => r.walFpiBytesPerSync)),
      walFpiBytesPerUnchangedSync: median(unchanged.map((r) => r.walFpiBytesPerSync)),
      rowsPerFirstSync: medianRows(first),
      rowsPerUnchangedSync: medianRows(unchanged),
      savedCardTuplesReadPerUnchangedSync: median(unchanged.map((r) => r.savedCardsReadPerSync)),
      peakRssMB: round(Math.max(...results.map((r) => r.peakRssMB)), 1),
    }),
  );
}

import { writeFileSync } from 'node:fs';
import { wilson } from '../../src/freshness/index.js';
import { lineChart } from '../chart.js';
import type { SimResult } from '../freshness/types.js';
import type { Forecast } from './forecast.js';
import type { Running, Sample } from './measure.js';
import type { Settings } from './settings.js';

// bench:freshness-e2e's results: the tables it prints (stale share against the sandbox beside the
// simulator's forecast, by window, since waking; the estimate and the audit against the truth)
// and its chart.

/** The run as it went: its settings, its clock, the wallets that woke, and both set-ups. */
export interface RunRecord {
  settings: Settings;
  /** When the wallets began to change, figures began (after the warm-up) and the run ended, ms. */
  startMs: number;
  warmMs: number;
  endMs: number;
  woken: ReadonlySet<number>;
  peers: ReadonlySet<number>;
  cont: Running;
  rr: Running;
}

/** The successful syncs and audits of each set-up after the warm-up (bench/freshness-e2e/measure.ts). */
export interface Counts {
  syncs: number;
  audits: number;
  changed: number;
}

export function pct(x: number): string {
  return `${(x * 100).toFixed(2)}%`;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** Prints the figures, after the warm-up. */
export function printReport(run: RunRecord, contCounts: Counts, rrCounts: Counts, sim: Forecast): void {
  const { settings, startMs, warmMs, endMs, woken, peers, cont, rr } = run;
  const { subscribers: n, budget, minutes, warmupMin, maxAgeMs, seed, createdDates, wakeUp } = settings;
  const { oracle, roundRobin: simRr, continuous: simCont } = sim;
  const report: string[] = [];
  const line = (s: string) => {
    report.push(s);
    console.log(s);
  };
  const after = (r: Running) => r.samples.filter((s) => s.atMs >= warmMs);
  const staleShare = (r: Running) => mean(after(r).map((s) => s.stale / n));
  const contShare = staleShare(cont);
  const rrShare = staleShare(rr);
  const seconds = (endMs - warmMs) / 1000;

  line(
    `${n} subscribers, ${budget} requests/s (a sweep every ${(n / budget).toFixed(0)} s), max age ${settings.flags.maxAge}, ` +
      `${minutes} min, figures from minute ${warmupMin} on (${after(cont).length} samples every ${settings.flags.sample}), seed ${seed}`,
  );
  line(
    `changes: ${settings.flags.changes} (share:rate; the rest never change); createDates ${createdDates}` +
      (wakeUp ? `; wake-up ${settings.flags.wakeUp}` : ''),
  );
  line('');
  line('| set-up | stale share (vs the sandbox) | × round robin | syncs/s | oldest copy | simulator |');
  line('|---|---:|---:|---:|---:|---:|');
  const oldest = (r: Running) => `${(Math.max(...after(r).map((s) => s.oldestMs)) / 1000).toFixed(0)} s`;
  line(
    `| uniform round robin | ${pct(rrShare)} | 1.00 | ${(rrCounts.syncs / seconds).toFixed(1)} | ${oldest(rr)} | ${pct(simRr.staleShare)} |`,
  );
  line(
    `| **continuous** | **${pct(contShare)}** | **${(contShare / rrShare).toFixed(2)}** | ${(contCounts.syncs / seconds).toFixed(1)} | ${oldest(cont)} | ${pct(simCont.staleShare)} |`,
  );
  line(
    `| oracle (simulated, knows every rate) | — | ${(oracle.staleShare / simRr.staleShare).toFixed(2)} of simulated round robin | — | — | ${pct(oracle.staleShare)} |`,
  );
  // The learning goes on after the warm-up: the ratio by five-minute window shows how far it got.
  for (let from = warmMs; from < endMs; from += 5 * 60_000) {
    const to = Math.min(endMs, from + 5 * 60_000);
    const inWindow = (r: Running) =>
      mean(r.samples.filter((x) => x.atMs >= from && x.atMs < to).map((x) => x.stale / n));
    line(
      `minutes ${(from - startMs) / 60_000}–${(to - startMs) / 60_000}: continuous ${pct(inWindow(cont))}, ` +
        `round robin ${pct(inWindow(rr))}, ratio ${(inWindow(cont) / inWindow(rr)).toFixed(2)}`,
    );
  }
  // Learning, middle and end: the span after the warm-up in thirds.
  line('');
  line('| window | continuous | round robin | × round robin |');
  line('|---|---:|---:|---:|');
  const third = (endMs - warmMs) / 3;
  for (const [name, k] of [
    ['learning', 0],
    ['middle', 1],
    ['end', 2],
  ] as const) {
    const from = warmMs + k * third;
    const inWindow = (r: Running) =>
      mean(r.samples.filter((x) => x.atMs >= from && x.atMs < from + third).map((x) => x.stale / n));
    line(
      `| ${name} (minutes ${((from - startMs) / 60_000).toFixed(1)}–${((from + third - startMs) / 60_000).toFixed(1)}) | ` +
        `${pct(inWindow(cont))} | ${pct(inWindow(rr))} | ${(inWindow(cont) / inWindow(rr)).toFixed(2)} |`,
    );
  }
  if (wakeUp && woken.size > 0) {
    // The wake-up target: the woken wallets' stale share back within 20% of their peers' (the
    // wallets always at that rate) inside one max age of waking.
    const wakeMs = startMs + wakeUp.afterMs;
    line('');
    line('| since waking | woken, continuous | peers, continuous | woken, round robin |');
    line('|---|---:|---:|---:|');
    for (let k = 0; wakeMs + k * maxAgeMs < endMs; k++) {
      const from = wakeMs + k * maxAgeMs;
      const share = (r: Running, pick: (s: Sample) => number, of: number) =>
        mean(r.samples.filter((x) => x.atMs >= from && x.atMs < from + maxAgeMs).map((x) => pick(x) / of));
      line(
        `| max age ${k + 1} | ${pct(share(cont, (s) => s.wokenStale, woken.size))} | ` +
          `${peers.size > 0 ? pct(share(cont, (s) => s.peersStale, peers.size)) : '— (no class at that rate)'} | ${pct(share(rr, (s) => s.wokenStale, woken.size))} |`,
      );
    }
  }
  const estimates = after(cont).map((s) => s.freshness!.estimatedStaleRatio);
  const truths = after(cont).map((s) => s.stale / n);
  const absError = mean(estimates.map((e, i) => Math.abs(e - truths[i]!)));
  const audit = wilson(contCounts.changed, contCounts.audits);
  line('');
  line(
    `estimate: mean ${pct(mean(estimates))} against a true ${pct(mean(truths))} ` +
      `(mean |error| ${(absError * 100).toFixed(2)} points, relative ${((mean(estimates) / mean(truths) - 1) * 100).toFixed(0)}%)`,
  );
  if (audit) {
    line(
      `audit over the same minutes: ${contCounts.changed}/${contCounts.audits} changed = ${pct(audit.ratio)} ` +
        `[${pct(audit.low)}, ${pct(audit.high)}]; estimate inside: ${mean(estimates) >= audit.low && mean(estimates) <= audit.high}, ` +
        `truth inside: ${mean(truths) >= audit.low && mean(truths) <= audit.high}`,
    );
  }
  const last = cont.samples.at(-1)!.freshness!;
  line(
    `status at the end: estimate ${pct(last.estimatedStaleRatio)}, audit ${last.audit.samples} samples ` +
      `${last.audit.staleRatio === null ? '—' : `${pct(last.audit.staleRatio)} [${pct(last.audit.low!)}, ${pct(last.audit.high!)}]`}, ` +
      `past max age ${last.pastMaxAge}, keeps max age ${last.keepsMaxAge}, truth ${pct(cont.samples.at(-1)!.stale / n)}`,
  );
}

/** The chart of the stale share over the run, against the sandbox's truth, to `path`. */
export function writeChart(path: string, run: RunRecord, oracle: SimResult): void {
  const { settings, startMs, warmMs, cont, rr } = run;
  const { subscribers: n, budget } = settings;
  const after = (r: Running) => r.samples.filter((s) => s.atMs >= warmMs);
  // After the warm-up: the first sweep's 100% (nobody synced yet) would flatten the rest.
  const shown = (r: Running) => after(r).slice(0, Math.min(after(cont).length, after(rr).length));
  const xs = shown(cont).map((s) => ((s.atMs - startMs) / 60_000).toFixed(1));
  const svg = lineChart(
    `Stale share against the sandbox's truth (${n} subscribers, ${budget}/s)`,
    xs.map((x, i) => (i % Math.ceil(xs.length / 10) === 0 ? `${x} min` : '')),
    'stale share (%)',
    [
      { name: 'round robin', color: '#d62728', values: shown(rr).map((s) => (s.stale / n) * 100) },
      { name: 'continuous', color: '#1f77b4', values: shown(cont).map((s) => (s.stale / n) * 100) },
      {
        name: 'its estimate',
        color: '#2ca02c',
        values: shown(cont).map((s) => s.freshness!.estimatedStaleRatio * 100),
      },
      { name: 'oracle (sim)', color: '#7f7f7f', values: shown(cont).map(() => oracle.staleShare * 100) },
    ],
    'minutes since the wallets began to change',
  );
  writeFileSync(path, svg);
  console.error(`chart: ${path}`);
}

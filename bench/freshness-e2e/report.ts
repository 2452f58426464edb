import { writeFileSync } from 'node:fs';
import { wilson } from '../../src/freshness/index.js';
import type { SimResult } from '../../test/support/freshness-sim/index.js';
import { lineChart } from '../chart.js';
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
  /** `--kill-every`: each SIGKILL of the continuous set-up's lease holder. */
  kills: readonly Kill[];
}

/** One SIGKILL of the lease holder: when, and how long until another worker held the lease (null: nobody did, or none was killed). */
export interface Kill {
  atMs: number;
  takeoverMs: number | null;
}

/** The kills in a line: how many, the longest takeover, and any that nobody took over. */
function killsLine(kills: readonly Kill[]): string {
  const took = kills.flatMap((k) => (k.takeoverMs === null ? [] : [k.takeoverMs]));
  const missed = kills.length - took.length;
  return (
    `${took.length} × SIGKILL of the lease holder, takeover ≤ ${took.length > 0 ? Math.max(...took) : 0} ms` +
    (missed > 0 ? `; ${missed} not taken over (or no holder to kill)` : '')
  );
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

/** The world of a run in one line: its classes, createDates and whatever else shapes it. */
function worldLine(settings: Settings): string {
  const { flags, createdDates, wakeUp, wallets, intake } = settings;
  return (
    `changes: ${flags.changes} (share:rate; the rest never change); createDates ${createdDates}` +
    (wakeUp ? `; wake-up ${flags.wakeUp}` : '') +
    (wallets
      ? `; change kinds ${flags.changeKinds}, wallets of ${wallets.minCards}–${wallets.maxCards} cards`
      : '') +
    (intake ? `; intake ${flags.intake} (enqueued as an operator does)` : '') +
    (settings.retune ? `; retune ${flags.retune} (the continuous workers restarted one by one)` : '')
  );
}

const signedPct = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(0)}%`;

/** The estimate against the truth, relative and in share points (the target: within 30% or 0.3 points). */
const estimateError = (w: { estimate: number; continuous: number }) =>
  `${signedPct(w.estimate / Math.max(1e-12, w.continuous) - 1)}, ${w.estimate >= w.continuous ? '+' : '−'}${(Math.abs(w.estimate - w.continuous) * 100).toFixed(2)} pt`;

/** The mean budget in force from the warm-up to the end (`--retune` changes it), requests a second. */
function meanBudget(run: RunRecord): number {
  const { settings, startMs, warmMs, endMs } = run;
  const r = settings.retune;
  if (!r) return settings.budget;
  const at = Math.min(endMs, Math.max(warmMs, startMs + r.afterMs));
  return (
    (settings.budget * (at - warmMs) + settings.budget * r.budgetFactor * (endMs - at)) / (endMs - warmMs)
  );
}

/** One third of the minutes after the warm-up, real and forecast. */
interface WindowFigures {
  name: 'learning' | 'middle' | 'end';
  fromMin: number;
  toMin: number;
  /** Mean stale shares against the sandbox (the truth). */
  continuous: number;
  roundRobin: number;
  /** continuous ÷ round robin, real and as the simulator forecast it for the same window. */
  ratio: number;
  forecastRatio: number;
  /** The continuous set-up's mean estimate of its stale share (`status`), beside `continuous`. */
  estimate: number;
}

/** The run after the warm-up in thirds (learning, middle, end), beside the forecast's same windows. */
function windowFigures(run: RunRecord, sim: Forecast): WindowFigures[] {
  const { startMs, warmMs, endMs, cont, rr } = run;
  const third = (endMs - warmMs) / 3;
  return (['learning', 'middle', 'end'] as const).map((name, k) => {
    const from = warmMs + k * third;
    const inside = (r: Running) => r.samples.filter((x) => x.atMs >= from && x.atMs < from + third);
    const share = (r: Running) => mean(inside(r).map((x) => x.stale / x.population));
    const forecastRatio =
      sim.continuous.windows[k]!.staleShare / Math.max(1e-12, sim.roundRobin.windows[k]!.staleShare);
    return {
      name,
      fromMin: (from - startMs) / 60_000,
      toMin: (from + third - startMs) / 60_000,
      continuous: share(cont),
      roundRobin: share(rr),
      ratio: share(cont) / share(rr),
      forecastRatio,
      estimate: mean(inside(cont).map((x) => x.freshness?.estimatedStaleRatio ?? 0)),
    };
  });
}

/** Prints the figures, after the warm-up. */
export function printReport(run: RunRecord, contCounts: Counts, rrCounts: Counts, sim: Forecast): void {
  const { settings, startMs, warmMs, endMs, woken, peers, cont, rr } = run;
  const { subscribers: n, budget, minutes, warmupMin, maxAgeMs, seed, wakeUp } = settings;
  const { oracle, roundRobin: simRr, continuous: simCont } = sim;
  const report: string[] = [];
  const line = (s: string) => {
    report.push(s);
    console.log(s);
  };
  const after = (r: Running) => r.samples.filter((s) => s.atMs >= warmMs);
  const staleShare = (r: Running) => mean(after(r).map((s) => s.stale / s.population));
  const contShare = staleShare(cont);
  const rrShare = staleShare(rr);
  const seconds = (endMs - warmMs) / 1000;

  line(
    `${n} subscribers, ${budget} requests/s (a sweep every ${(n / budget).toFixed(0)} s), max age ${settings.flags.maxAge}, ` +
      `${minutes} min, figures from minute ${warmupMin} on (${after(cont).length} samples every ${settings.flags.sample}), seed ${seed}`,
  );
  line(`${settings.world ? `world ${settings.world}: ` : ''}${worldLine(settings)}`);
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
  if (run.kills.length > 0) {
    line('');
    line(
      `Under --kill-every ${settings.flags.killEvery}: ${killsLine(run.kills)}; the continuous set-up spent ` +
        `${((contCounts.syncs / seconds / meanBudget(run)) * 100).toFixed(1)}% of its budget after the warm-up.`,
    );
  }
  // The learning goes on after the warm-up: the ratio by five-minute window shows how far it got.
  for (let from = warmMs; from < endMs; from += 5 * 60_000) {
    const to = Math.min(endMs, from + 5 * 60_000);
    const inWindow = (r: Running) =>
      mean(r.samples.filter((x) => x.atMs >= from && x.atMs < to).map((x) => x.stale / x.population));
    line(
      `minutes ${(from - startMs) / 60_000}–${(to - startMs) / 60_000}: continuous ${pct(inWindow(cont))}, ` +
        `round robin ${pct(inWindow(rr))}, ratio ${(inWindow(cont) / inWindow(rr)).toFixed(2)}`,
    );
  }
  // Learning, middle and end: the span after the warm-up in thirds.
  line('');
  line(
    '| window | continuous | round robin | × round robin | forecast × round robin | real vs forecast | estimate (vs the truth) |',
  );
  line('|---|---:|---:|---:|---:|---:|---:|');
  for (const w of windowFigures(run, sim)) {
    line(
      `| ${w.name} (minutes ${w.fromMin.toFixed(1)}–${w.toMin.toFixed(1)}) | ` +
        `${pct(w.continuous)} | ${pct(w.roundRobin)} | ${w.ratio.toFixed(2)} | ${w.forecastRatio.toFixed(2)} | ` +
        `${signedPct(w.ratio / w.forecastRatio - 1)} | ${pct(w.estimate)} (${estimateError(w)}) |`,
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
  const truths = after(cont).map((s) => s.stale / s.population);
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
      `past max age ${last.pastMaxAge}, keeps max age ${last.keepsMaxAge}, truth ${pct(cont.samples.at(-1)!.stale / cont.samples.at(-1)!.population)}`,
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
      { name: 'round robin', color: '#d62728', values: shown(rr).map((s) => (s.stale / s.population) * 100) },
      {
        name: 'continuous',
        color: '#1f77b4',
        values: shown(cont).map((s) => (s.stale / s.population) * 100),
      },
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

/** One world's run, as bench:freshness-worlds tabulates it. */
export interface WorldSummary {
  world: string;
  /** The world in one line ({@link worldLine}). */
  about: string;
  /** Mean stale shares over the minutes after the warm-up, and continuous ÷ round robin, real and forecast. */
  roundRobin: number;
  continuous: number;
  ratio: number;
  forecastRatio: number;
  windows: WindowFigures[];
  /** The continuous set-up's oldest copy after the warm-up, and the most `status` counted past the max age. */
  oldestMs: number;
  pastMaxAge: number;
  maxAgeMs: number;
  /** Successful syncs a second of the continuous set-up after the warm-up, against its budget. */
  syncsPerSec: number;
  budget: number;
  /** `--kill-every`: its kills in a line; undefined without. */
  kills: string | undefined;
}

/** The figures of one world's run for the table of every world. */
export function worldSummary(world: string, run: RunRecord, contCounts: Counts, sim: Forecast): WorldSummary {
  const { settings, warmMs, endMs, cont, rr } = run;
  const after = (r: Running) => r.samples.filter((s) => s.atMs >= warmMs);
  const share = (r: Running) => mean(after(r).map((s) => s.stale / s.population));
  return {
    world,
    about: worldLine(settings),
    roundRobin: share(rr),
    continuous: share(cont),
    ratio: share(cont) / share(rr),
    forecastRatio: sim.continuous.staleShare / sim.roundRobin.staleShare,
    windows: windowFigures(run, sim),
    oldestMs: Math.max(...after(cont).map((s) => s.oldestMs)),
    pastMaxAge: Math.max(...after(cont).map((s) => s.freshness?.pastMaxAge ?? 0)),
    // The larger of a `--retune`'s two: the copies may grow as old as the longer one allows.
    maxAgeMs: settings.maxAgeMs * Math.max(1, settings.retune?.maxAgeFactor ?? 1),
    syncsPerSec: contCounts.syncs / ((endMs - warmMs) / 1000),
    budget: meanBudget(run),
    kills: run.kills.length > 0 ? killsLine(run.kills) : undefined,
  };
}

/**
 * The table of every world: continuous against round robin over the minutes after the warm-up and
 * by window, each beside the simulator's forecast for the same window and the gap between them,
 * the estimate against the truth by window, the oldest copy and whether anyone passed the max age.
 */
export function worldsTable(summaries: readonly WorldSummary[]): string[] {
  const first = summaries[0];
  if (!first) return [];
  const span = (a: number, b: number) => `${+a.toFixed(1)}–${+b.toFixed(1)}`;
  const all = span(first.windows[0]!.fromMin, first.windows[2]!.toMin);
  const heads = first.windows.map((w) => `${w.name} ${span(w.fromMin, w.toMin)}: real / forecast (gap)`);
  const killed = summaries.some((s) => s.kills !== undefined);
  const lines = [
    `| world | round robin ${all} | continuous ${all} (× rr) | forecast × rr | ${heads.join(' | ')} | estimate vs truth (${first.windows.map((w) => w.name).join(' / ')}) | oldest copy | nobody past max age | syncs/s |${killed ? ' SIGKILLs |' : ''}`,
    `|---|---:|---:|---:|${first.windows.map(() => '---:').join('|')}|---:|---:|:---:|---:|${killed ? '---|' : ''}`,
  ];
  for (const s of summaries) {
    const cells = s.windows.map(
      (w) =>
        `${w.ratio.toFixed(2)} / ${w.forecastRatio.toFixed(2)} (${signedPct(w.ratio / w.forecastRatio - 1)})`,
    );
    const estimates = s.windows.map(estimateError).join(' / ');
    const kept = s.pastMaxAge === 0 && s.oldestMs <= s.maxAgeMs;
    lines.push(
      `| ${s.world} | ${pct(s.roundRobin)} | ${pct(s.continuous)} (${s.ratio.toFixed(2)}) | ${s.forecastRatio.toFixed(2)} | ` +
        `${cells.join(' | ')} | ${estimates} | ${(s.oldestMs / 1000).toFixed(0)} s | ` +
        `${kept ? 'yes' : `**no** (${s.pastMaxAge} past it)`} | ${s.syncsPerSec.toFixed(1)} of ${+s.budget.toFixed(1)} ` +
        `(${((s.syncsPerSec / s.budget) * 100).toFixed(1)}%) |${killed ? ` ${s.kills ?? 'none'} |` : ''}`,
    );
  }
  return lines;
}

/** A colour per world, in the order they ran. */
const WORLD_COLORS = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];

/** The chart of every world: continuous ÷ round robin by window, real (solid) against forecast (dashed). */
export function writeWorldsChart(path: string, summaries: readonly WorldSummary[]): void {
  const first = summaries[0];
  if (!first) return;
  const svg = lineChart(
    'Continuous × round robin by window: real (solid) against the forecast (sim, dashed)',
    first.windows.map((w) => `${w.name} ${+w.fromMin.toFixed(1)}–${+w.toMin.toFixed(1)} min`),
    'stale share × round robin',
    summaries.flatMap((s, i) => {
      const color = WORLD_COLORS[i % WORLD_COLORS.length]!;
      return [
        { name: s.world, color, values: s.windows.map((w) => w.ratio) },
        { name: `${s.world} (sim)`, color, dashed: true, values: s.windows.map((w) => w.forecastRatio) },
      ];
    }),
    'window of the run',
  );
  writeFileSync(path, svg);
  console.error(`chart: ${path}`);
}

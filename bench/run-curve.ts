import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { lineChart } from './chart.js';
import { resetDatabase } from './harness.js';
import { round } from './run-figures.js';
import type { RunFlags } from './run-flags.js';
import { runPipeline } from './run-pipeline.js';

// `npm run bench -- --curve`: cards-sync alone at growing sizes, printed, charted and summed up.

/** cards-sync alone at each size, on a fresh database: subscribers/s and CPU per subscriber. */
export async function curve(flags: RunFlags, api: { url: string; child: ChildProcess }, sizes: number[]) {
  const { values, k, databaseUrl } = flags;
  const points: {
    subscribers: number;
    subscribersPerSec: number;
    steadySubscribersPerSec: number;
    cpuMsPerSubscriber: number;
    workerCpuMs: number;
    postgresCpuMs: number;
  }[] = [];
  for (const size of sizes) {
    await resetDatabase(databaseUrl);
    const r = await runPipeline(flags, 'c-cards-sync', api, size);
    const cpu = r.cpuMsPerSubscriber!;
    points.push({
      subscribers: size,
      subscribersPerSec: round(r.subscribersPerSec),
      steadySubscribersPerSec: round(r.steadySubscribersPerSec),
      cpuMsPerSubscriber: round(cpu.worker + cpu.api + cpu.redis + cpu.postgres, 3),
      workerCpuMs: cpu.worker,
      postgresCpuMs: cpu.postgres,
    });
    console.log(`  ${String(size).padStart(7)} subscribers: ${round(r.subscribersPerSec)} subscribers/s`);
  }
  console.log(
    '\nsubscribers  subs/s  second half subs/s  wall ms/1000 subs (second half)  CPU ms/subscriber: all parts  worker  Postgres',
  );
  for (const p of points) {
    console.log(
      `${String(p.subscribers).padStart(11)} ${String(p.subscribersPerSec).padStart(7)} ${String(p.steadySubscribersPerSec).padStart(19)} ` +
        `${String(round(1e6 / p.steadySubscribersPerSec)).padStart(32)} ` +
        `${String(p.cpuMsPerSubscriber).padStart(29)} ${String(p.workerCpuMs).padStart(7)} ${String(p.postgresCpuMs).padStart(9)}`,
    );
  }
  writeFileSync(
    values.chart!,
    lineChart(
      `cards-sync, ${k} cards a subscriber: cost per subscriber by run size`,
      points.map((p) => p.subscribers.toLocaleString('en')),
      'ms per subscriber',
      [
        {
          name: 'wall time, whole run',
          color: '#1f77b4',
          values: points.map((p) => 1000 / p.subscribersPerSec),
        },
        {
          name: 'wall time, 2nd half',
          color: '#ff7f0e',
          values: points.map((p) => 1000 / p.steadySubscribersPerSec),
        },
        { name: 'CPU, all parts', color: '#d62728', values: points.map((p) => p.cpuMsPerSubscriber) },
        { name: 'CPU, worker', color: '#2ca02c', values: points.map((p) => p.workerCpuMs) },
        { name: 'CPU, Postgres', color: '#9467bd', values: points.map((p) => p.postgresCpuMs) },
      ],
    ),
  );
  console.log(`chart written to ${values.chart}`);
  const perSub = points.map((p) => 1 / p.steadySubscribersPerSec);
  console.log(
    JSON.stringify({
      curve: points,
      cardsPerSubscriber: k,
      // Largest over smallest steady (second-half) wall time per subscriber: 1 is perfectly flat.
      wall_cost_spread: round(Math.max(...perSub) / Math.min(...perSub), 3),
    }),
  );
}

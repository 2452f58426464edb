import type { Job } from 'bullmq';

// What every pipeline's worker process measures and prints, the same way for all of them. Nothing
// here imports the product, so that the raw ceiling's process (bench/raw-worker.ts) stays light.

/** The line a pipeline's worker process prints last: what bench/run-pipeline.ts reads. */
export interface PipelineResult {
  pipeline: string;
  jobs: number;
  /** Jobs that failed (every attempt spent): a pipeline that measured failures measured nothing. */
  failed: number;
  seconds: number;
  subscribersPerSec: number;
  /** The second half alone: the steady rate, without the process's start and warm-up. */
  steadySubscribersPerSec: number;
  cardsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMB: number;
  workerCpuMs: number;
}

/** Counts finished jobs until `total`; `done` resolves then. Starts the clocks when called. */
export function pipelineClock(total: number) {
  const durations: number[] = [];
  let cards = 0;
  let finished = 0;
  let failed = 0;
  let halfway = 0;
  let doneAt = 0;
  const { promise: done, resolve: resolveDone } = Promise.withResolvers<void>();
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  let seconds = 0;
  let cpu: NodeJS.CpuUsage = { user: 0, system: 0 };
  return {
    done,
    addCards(n: number) {
      cards += n;
    },
    /** A job completed (or failed, with `ok` false). */
    finished(job: Job | undefined, ok = true) {
      if (job?.processedOn && job.finishedOn) durations.push(job.finishedOn - job.processedOn);
      finished++;
      if (!ok) failed++;
      if (finished === Math.ceil(total / 2)) halfway = performance.now();
      if (finished >= total) {
        doneAt = performance.now();
        seconds = (doneAt - started) / 1000;
        cpu = process.cpuUsage(cpuStart);
        resolveDone();
      }
    },
    /** The result line, from the clocks as they stood when the last job finished. */
    result(pipeline: string): PipelineResult {
      durations.sort((x, y) => x - y);
      const pct = (p: number) =>
        durations[Math.min(durations.length - 1, Math.floor(p * durations.length))] ?? 0;
      return {
        pipeline,
        jobs: finished,
        failed,
        seconds,
        subscribersPerSec: finished / seconds,
        steadySubscribersPerSec: (finished - Math.ceil(total / 2)) / ((doneAt - halfway) / 1000),
        cardsPerSec: cards / seconds,
        p50Ms: pct(0.5),
        p99Ms: pct(0.99),
        peakRssMB: process.resourceUsage().maxRSS / 1024,
        workerCpuMs: (cpu.user + cpu.system) / 1000,
      };
    },
  };
}

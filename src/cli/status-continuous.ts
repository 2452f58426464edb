import { leaseLine } from '../fleet/index.js';
import { formatDuration, formatTime } from '../shared/index.js';
import type { ContinuousStatus } from '../status/index.js';

/**
 * The refresh lines of `status` in REFRESH_MODE=continuous, in place of the nightly schedule and
 * the run's "done of planned, ETA": a window spends a budget of requests and then the next begins.
 */
export function formatContinuous(c: ContinuousStatus): string[] {
  const w = c.window;
  const lines: string[] = [];
  if (w === null) {
    lines.push(
      'continuous refresh: no window yet (a worker in REFRESH_MODE=continuous opens one within a minute)',
    );
  } else {
    const until = w.endsAt ? ` until ${formatTime(w.endsAt)}` : '';
    const head = `continuous refresh: window ${w.refreshRunId}`;
    if (w.status === 'halted')
      lines.push(`${head}: HALTED by the mass-removal breaker: ${w.haltedReason ?? ''}`);
    else if (w.status === 'running') lines.push(`${head}: running since ${formatTime(w.startedAt)}${until}`);
    else lines.push(`${head} (the last one): ${w.status}, ran ${formatTime(w.startedAt)}${until}`);
    const budget =
      w.budgetRequests === null
        ? `${w.spent} requests spent (no budget recorded)`
        : `${w.spent} of its ${w.budgetRequests} requests spent` +
          (w.allowedByNow !== null && w.status === 'running'
            ? ` (${w.allowedByNow} allowed by now at ${w.budgetPerSec}/s)`
            : w.budgetPerSec !== null
              ? ` (budget ${w.budgetPerSec}/s)`
              : '');
    const e = w.ended;
    lines.push(
      `  budget: ${budget}; ${e.total} syncs ended: succeeded ${e.succeeded}, failed ${e.failed}, not found ${e.notFound}, invalid ${e.invalid}`,
    );
  }
  lines.push(`  lease: ${leaseLine(c.leaseHolder)}`);
  lines.push(
    `  due now: ${c.dueNow} subscribers; ${c.pastMaxAge} past the max age of ${formatDuration(c.maxAgeSeconds)}; ${c.neverSynced} never synced`,
  );
  lines.push(
    c.oldestCopy === null
      ? '  oldest copy: none yet (no subscriber synced successfully)'
      : `  oldest copy: ${formatDuration(c.oldestCopy.ageSeconds)} old (last success ${formatTime(c.oldestCopy.lastSuccessAt)})`,
  );
  return lines;
}

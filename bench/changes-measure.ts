import { setTimeout as sleep } from 'node:timers/promises';
import { walByRelation } from './wal.js';

// How bench/changes.ts waits for a phase's end and reads its figures: polling, percentiles, WAL per event.

/** Polls `f` every 100 ms until it holds (true) or `timeoutMs` passes (false, said on stderr). */
export async function waitUntil(
  what: string,
  f: () => Promise<boolean>,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) {
      console.error(`  (gave up waiting for ${what})`);
      return false;
    }
    await sleep(100);
  }
  return true;
}

/** The `p`th percentile of ascending `sorted`; NaN if it is empty. */
export const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : Number.NaN;

/** WAL of the bench database in a range, per event: all, without images, change_events', webhooks'. */
export async function walPerEvent(databaseUrl: string, from: string, to: string, events: number) {
  const rows = (await walByRelation(databaseUrl, from, to)) ?? [];
  const sum = (f: (what: string) => boolean, key: 'bytes' | 'fpiBytes') =>
    rows.filter((r) => f(r.what)).reduce((s, r) => s + r[key], 0);
  const per = (x: number) => Math.round(x / Math.max(1, events));
  const all = () => true;
  const outbox = (w: string) => w.startsWith('change_events');
  const hooks = (w: string) => w.startsWith('webhook_');
  return {
    all: per(sum(all, 'bytes')),
    allNoFpi: per(sum(all, 'bytes') - sum(all, 'fpiBytes')),
    outbox: per(sum(outbox, 'bytes')),
    outboxNoFpi: per(sum(outbox, 'bytes') - sum(outbox, 'fpiBytes')),
    webhooksNoFpi: per(sum(hooks, 'bytes') - sum(hooks, 'fpiBytes')),
    byRelation: rows
      .filter((r) => outbox(r.what))
      .map((r) => `${r.what} ${per(r.bytes - r.fpiBytes)}`)
      .join(', '),
  };
}

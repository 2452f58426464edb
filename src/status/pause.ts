import { describeRejectedKey, type KeyRejection, type PauseReason } from '../../jobs/sync/index.js';
import { formatTime } from '../shared/index.js';

// How a pause and a rejected API key are told to people, by `status` and the admin overview alike:
// what paused the queue and who, the reason now and the ones it replaced, and which process holds
// a rejected key.

/** The lines under `paused by …`: who, the reasons replaced, the rejected key's process. */
export function pauseDetailLines(p: PauseReason): string[] {
  const lines: string[] = [];
  if (p.actor !== undefined || p.reasonBy !== undefined) {
    lines.push(
      `paused by ${p.actor ?? 'someone'}` +
        (p.reasonBy
          ? `; the reason now is ${p.reasonBy.actor}'s, given at ${formatTime(p.reasonBy.at)}`
          : ''),
    );
  }
  for (const e of p.earlier ?? [])
    lines.push(`earlier reason (${e.actor ?? 'someone'} at ${formatTime(e.at)}): ${e.reason}`);
  if (p.rejectedKey) lines.push(`the rejected key: ${describeRejectedKey(p.rejectedKey)}`);
  return lines;
}

/** One rejection in a sentence: whose key, when, and what the process did about it. */
export function describeRejection(r: KeyRejection): string {
  const did =
    r.scope === 'process'
      ? `it stopped itself and the queue was not paused (key ${r.workingKeys.join(', ')} works for live workers)`
      : 'it paused the queue (no other key was known to work)';
  return `${describeRejectedKey(r)}, at ${formatTime(r.at)}: ${did}`;
}

/** The `status` lines of keys rejected in the last 24 h that have not worked since. */
export function rejectedKeyLines(rejections: readonly KeyRejection[]): string[] {
  if (rejections.length === 0) return [];
  return [
    'API KEY REJECTED (last 24 h, not accepted since): fix CARDS_API_KEY of that process and restart it',
    ...rejections.map((r) => `  ${describeRejection(r)}`),
  ];
}

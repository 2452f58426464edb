import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseCards, recordProblem } from '../src/api/schema.js';
import { cardsFor } from '../src/mock-api/data.js';
import { parseFlags } from './harness.js';

// npm run bench:client [-- --cards 5 --answers 200000]
//   CPU of the API client's own steps, per answer (no network, no queue), best of 5 passes. Each
//   variant runs in a process of its own, and the event loop turns every 1,000 calls as it does in
//   a worker, so that one variant's timers and garbage are never charged to the next:
//   - reading the body: JSON.parse only (what r does); JSON.parse and the schema field by field
//     (zod, the path every record took before the hand-checked fast path); JSON.parse and
//     parseCards (the fast path, zod only for a record it does not pass);
//   - the request's deadline combined with the job's signal: AbortSignal.timeout and
//     AbortSignal.any (before), against one AbortController, a timer and a listener (now).

const { values } = parseFlags({
  options: {
    cards: { type: 'string', default: '5' },
    answers: { type: 'string', default: '200000' },
    variant: { type: 'string' },
  },
});
const k = Number(values.cards);
const total = Number(values.answers);
const bodies = Array.from({ length: 1000 }, (_, i) =>
  JSON.stringify(cardsFor(i + 1, { cardsPerSubscriber: k })),
);

/** parseCards as it was before the fast path: every field through the schema, then the same checks. */
function zodOnly(text: string): number {
  const body = JSON.parse(text) as Record<string, unknown>[];
  const seen = new Map<number, number>();
  const cards: Record<string, unknown>[] = [];
  for (const [index, record] of body.entries()) {
    const problem = recordProblem(record, index);
    if (problem) throw new Error(problem);
    if (seen.has(record.id as number)) throw new Error('repeated id');
    seen.set(record.id as number, index);
    cards.push({
      id: record.id,
      cardToken: record.cardToken,
      binNumber: record.binNumber,
      cardFamily: record.cardFamily,
      cardBankCode: record.cardBankCode,
      cardBankName: record.cardBankName,
      subscriberId: record.subscriberId,
      companyId: record.companyId,
      createDate: record.createDate,
    });
  }
  return cards.length;
}

const variants: [string, (text: string) => number][] = [
  ['JSON.parse only (r)', (text) => (JSON.parse(text) as unknown[]).length],
  ['JSON.parse + zod field by field (before)', zodOnly],
  ['JSON.parse + parseCards (fast path)', (text) => parseCards(JSON.parse(text)).length],
];

const job = new AbortController();
const noop = () => {};
/** Before: a timeout signal combined with the job's, listened to as undici does. */
function signalsBefore(): number {
  const signal = AbortSignal.any([AbortSignal.timeout(10_000), job.signal]);
  signal.addEventListener('abort', noop);
  signal.removeEventListener('abort', noop);
  return 1;
}
/** Now (src/api/client.ts): one controller, a timer, a listener on the job's signal, all torn down. */
function signalsNow(): number {
  const controller = new AbortController();
  const cancel = () => controller.abort();
  const timer = setTimeout(cancel, 10_000);
  job.signal.addEventListener('abort', cancel, { once: true });
  controller.signal.addEventListener('abort', noop);
  controller.signal.removeEventListener('abort', noop);
  clearTimeout(timer);
  job.signal.removeEventListener('abort', cancel);
  return 1;
}
variants.push(
  ['deadline + job signal: AbortSignal.timeout/any (before)', signalsBefore],
  ['deadline + job signal: one controller and a timer', signalsNow],
);

async function measure(f: (text: string) => number): Promise<number> {
  let sink = 0;
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 5; pass++) {
    const started = process.cpuUsage();
    for (let i = 0; i < total; i++) {
      sink += f(bodies[i % bodies.length]!);
      if (i % 1000 === 999) await new Promise(setImmediate);
    }
    const used = process.cpuUsage(started);
    best = Math.min(best, (used.user + used.system) / total);
  }
  if (sink === 0) throw new Error('no cards');
  return Math.round(best * 100) / 100;
}

if (values.variant !== undefined) {
  const [, f] = variants[Number(values.variant)]!;
  console.log(await measure(f));
} else {
  const results: Record<string, number> = {};
  for (const [index, [name]] of variants.entries()) {
    const output = execFileSync(process.execPath, [
      fileURLToPath(import.meta.url),
      '--cards',
      String(k),
      '--answers',
      String(total),
      '--variant',
      String(index),
    ]);
    results[name] = Number(output.toString().trim());
    console.log(`${name.padEnd(56)} ${results[name]!.toFixed(2).padStart(7)} µs/answer`);
  }
  console.log(JSON.stringify({ cardsPerSubscriber: k, answers: total, microsecondsPerAnswer: results }));
}

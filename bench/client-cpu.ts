import { parseArgs } from 'node:util';
import { parseCards, recordProblem } from '../src/api/schema.js';
import { cardsFor } from '../src/mock-api/data.js';

// npm run bench:validation [-- --cards 5 --answers 200000]
//   CPU per answer of reading one API body in the worker, in this process alone (no network, no
//   queue): JSON.parse only (what r does), JSON.parse and the schema field by field (zod, the
//   path every record took before the hand-checked fast path), and JSON.parse and parseCards (the
//   fast path, zod only for a record it does not pass). Microseconds per answer, best of 5 passes.

const { values } = parseArgs({
  options: { cards: { type: 'string', default: '5' }, answers: { type: 'string', default: '200000' } },
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
    const {
      id,
      cardToken,
      binNumber,
      cardFamily,
      cardBankCode,
      cardBankName,
      subscriberId,
      companyId,
      createDate,
    } = record;
    if (seen.has(id as number)) throw new Error('repeated id');
    seen.set(id as number, index);
    cards.push({
      id,
      cardToken,
      binNumber,
      cardFamily,
      cardBankCode,
      cardBankName,
      subscriberId,
      companyId,
      createDate,
    });
  }
  return cards.length;
}

const variants: [string, (text: string) => number][] = [
  ['JSON.parse only (r)', (text) => (JSON.parse(text) as unknown[]).length],
  ['JSON.parse + zod field by field (before)', zodOnly],
  ['JSON.parse + parseCards (fast path)', (text) => parseCards(JSON.parse(text)).length],
];

let sink = 0;
const results: Record<string, number> = {};
for (const [name, f] of variants) {
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 5; pass++) {
    const started = process.cpuUsage();
    for (let i = 0; i < total; i++) sink += f(bodies[i % bodies.length]!);
    const used = process.cpuUsage(started);
    best = Math.min(best, (used.user + used.system) / total);
  }
  results[name] = Math.round(best * 100) / 100;
  console.log(`${name.padEnd(44)} ${results[name]!.toFixed(2).padStart(7)} µs/answer`);
}
if (sink === 0) console.log('(no cards)');
console.log(JSON.stringify({ cardsPerSubscriber: k, answers: total, microsecondsPerAnswer: results }));

import { readFileSync, writeFileSync } from 'node:fs';

// One trace as a waterfall SVG, as a tracing UI draws it, from the spans test/process/tracing.test.ts's
// OTLP receiver decoded (`TRACE_DUMP=spans.json npx vitest run test/process/tracing.test.ts`):
//
//   node dist-bench/bench/trace-chart.js spans.json docs/trace.svg [id:62100]
//
// With a subscriber (`cards_sync.subscriber` of its job spans), only its sync is drawn: its job
// spans, what ran under them, and what they ran under (the enqueue).

interface Span {
  spanId: string;
  parentSpanId: string;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The few attributes worth reading beside a span's name. */
function note(s: Span): string {
  const a = s.attributes;
  const pick = (k: string, label = k.replace(/^cards_sync\./, '')) =>
    a[k] === undefined ? [] : [`${label}=${a[k]}`];
  return [
    ...pick('cards_sync.subscriber', 'subscriber'),
    ...pick('cards_sync.attempt'),
    ...pick('cards_sync.outcome'),
    ...pick('cards_sync.api.code', 'code'),
    ...pick('http.response.status_code', 'status'),
    ...pick('cards_sync.batch_size', 'batch'),
    ...pick('cards_sync.cards_changed', 'changed'),
    ...pick('cards_sync.targets', 'targets'),
  ].join(' ');
}

function colour(name: string): string {
  if (name.startsWith('cards_sync') || name.startsWith('queue')) return '#4e79a7';
  if (name.startsWith('addBulk') || name.startsWith('process') || /^(complete|retry|fail)/.test(name))
    return '#f28e2b';
  if (name.startsWith('api.') || name === 'GET') return '#59a14f';
  return '#b07aa1';
}

/** The spans of one subscriber's sync: its jobs, their descendants and their ancestors. */
export function oneSync(spans: Span[], subscriber: string): Span[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const keep = new Set<string>();
  const jobs = spans.filter((s) => s.attributes['cards_sync.subscriber'] === subscriber);
  for (const job of jobs) {
    for (let p: Span | undefined = job; p; p = byId.get(p.parentSpanId)) keep.add(p.spanId);
  }
  let grew = true;
  while (grew) {
    grew = false;
    for (const s of spans) {
      if (!keep.has(s.spanId) && keep.has(s.parentSpanId)) {
        // Below the enqueue and BullMQ's add only this subscriber's jobs are kept.
        const parent = byId.get(s.parentSpanId)!;
        if (parent.name.startsWith('addBulk') && !jobs.includes(s)) continue;
        if (parent.name === 'cards_sync.enqueue' && !s.name.startsWith('addBulk')) continue;
        keep.add(s.spanId);
        grew = true;
      }
    }
  }
  return spans.filter((s) => keep.has(s.spanId));
}

export function traceChart(spans: Span[]): string {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, Span[]>();
  for (const s of spans) {
    const parent = ids.has(s.parentSpanId) ? s.parentSpanId : '';
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const rows: { span: Span; depth: number }[] = [];
  const walk = (parent: string, depth: number) => {
    for (const s of (children.get(parent) ?? []).sort((a, b) => a.startMs - b.startMs)) {
      rows.push({ span: s, depth });
      walk(s.spanId, depth + 1);
    }
  };
  walk('', 0);
  const t0 = Math.min(...spans.map((s) => s.startMs));
  const t1 = Math.max(...spans.map((s) => s.endMs));
  const rowH = 20;
  const labelW = 560;
  const barW = 520;
  const w = labelW + barW + 20;
  const h = 50 + rows.length * rowH + 20;
  const x = (t: number) => labelW + ((t - t0) / (t1 - t0 || 1)) * barW;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="11">`,
    `<title>One sync's trace, drawn from an OTLP export</title>`,
    `<rect width="${w}" height="${h}" fill="white"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">One sync's trace: ${rows.length} spans over ${Math.round(t1 - t0)} ms (drawn from an OTLP export, test/process/tracing.test.ts)</text>`,
    `<text x="${labelW}" y="40" fill="#555">0 ms</text>`,
    `<text x="${labelW + barW}" y="40" fill="#555" text-anchor="end">${Math.round(t1 - t0)} ms</text>`,
  ];
  rows.forEach(({ span, depth }, i) => {
    const y = 50 + i * rowH;
    if (i % 2 === 0) out.push(`<rect x="0" y="${y}" width="${w}" height="${rowH}" fill="#f5f5f5"/>`);
    const ms = span.endMs - span.startMs;
    const label = `${span.name}  ${note(span)}`;
    out.push(
      `<text x="${10 + depth * 14}" y="${y + 14}">${esc(label.length > 95 - depth * 2 ? `${label.slice(0, 92 - depth * 2)}…` : label)}</text>`,
      `<rect x="${x(span.startMs).toFixed(1)}" y="${y + 4}" width="${Math.max(1.5, x(span.endMs) - x(span.startMs)).toFixed(1)}" height="${rowH - 8}" fill="${colour(span.name)}"/>`,
      `<text x="${Math.min(x(span.endMs) + 4, w - 60).toFixed(1)}" y="${y + 14}" fill="#333">${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

const [input, output, subscriber] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: trace-chart.js SPANS.json OUT.svg [SUBSCRIBER]');
  process.exit(2);
}
const all = JSON.parse(readFileSync(input, 'utf8')) as Span[];
writeFileSync(output, traceChart(subscriber ? oneSync(all, subscriber) : all));

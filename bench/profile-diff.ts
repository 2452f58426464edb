import { readFileSync } from 'node:fs';
import { parseFlags } from './harness.js';

// Where two pipelines' worker processes spend their CPU differently: self time by function and by
// package, from two V8 CPU profiles (`npm run bench -- --only r,a --rounds 1 --cpu-prof DIR`
// writes one per pipeline, in the order they ran), per subscriber.
//
//   node dist-bench/bench/profile-diff.js --jobs 20000 --top 10 r.cpuprofile a.cpuprofile

const { values, positionals } = parseFlags({
  allowPositionals: true,
  options: {
    /** Jobs each profiled process ran: figures are µs per subscriber. */
    jobs: { type: 'string', default: '1' },
    top: { type: 'string', default: '10' },
  },
});
if (positionals.length !== 2) {
  console.error('usage: profile-diff.js [--jobs N] [--top N] BASE.cpuprofile OTHER.cpuprofile');
  process.exit(2);
}
const jobs = Number(values.jobs);
const top = Number(values.top);

interface Profile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
  }[];
  samples: number[];
  timeDeltas: number[];
}

/** `bullmq`, `undici`, `node:internal`, `cards-sync src/api`…: where a function lives. */
function owner(url: string): string {
  if (url === '') return '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  const own = /\/dist\/([^/]+\/[^/]+)\//.exec(url) ?? /\/dist\/([^/]+)\//.exec(url);
  return own ? `cards-sync ${own[1]}` : url;
}

/** Self µs per subscriber by function and by owner. */
function selfTimes(path: string) {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const fns = new Map<string, number>();
  const owners = new Map<string, number>();
  let total = 0;
  for (const [i, id] of profile.samples.entries()) {
    const us = profile.timeDeltas[i] ?? 0;
    const frame = byId.get(id)!.callFrame;
    // Waiting is not spending.
    if (frame.functionName === '(idle)') continue;
    const where = frame.url
      ? `${frame.url.replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, '')}:${frame.lineNumber + 1}`
      : '';
    const fn = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    fns.set(fn, (fns.get(fn) ?? 0) + us / jobs);
    const o = owner(frame.url);
    owners.set(o, (owners.get(o) ?? 0) + us / jobs);
    total += us / jobs;
  }
  return { fns, owners, total };
}

const [base, other] = positionals.map(selfTimes) as [
  ReturnType<typeof selfTimes>,
  ReturnType<typeof selfTimes>,
];
const fmt = (x: number) => x.toFixed(1).padStart(8);
const list = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(`${fmt(v)}  ${k}`);
};
const diff = (title: string, a: Map<string, number>, b: Map<string, number>) => {
  const keys = new Set([...a.keys(), ...b.keys()]);
  const d = [...keys].map((k) => [k, (b.get(k) ?? 0) - (a.get(k) ?? 0)] as const);
  console.log(`\n${title} (µs per subscriber, ${positionals[1]} minus ${positionals[0]})`);
  for (const [k, v] of d.sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, top)) {
    console.log(`${fmt(v)}  ${fmt(a.get(k) ?? 0)} → ${fmt(b.get(k) ?? 0)}  ${k}`);
  }
};
console.log(`sampled µs per subscriber: ${base.total.toFixed(1)} and ${other.total.toFixed(1)}`);
list(`top self time, ${positionals[0]}`, base.fns);
list(`top self time, ${positionals[1]}`, other.fns);
diff('by owner', base.owners, other.owners);
diff('by function', base.fns, other.fns);

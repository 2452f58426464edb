import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { FAULT_REPORT_DIR, type FaultRow } from '../../faults/report.js';

/** Clears the last run's rows; prints the table of this run's when the suite ends. */
export default function setup() {
  rmSync(FAULT_REPORT_DIR, { recursive: true, force: true });
  return () => {
    let files: string[] = [];
    try {
      files = readdirSync(FAULT_REPORT_DIR).filter((f) => f.endsWith('.json'));
    } catch {
      return;
    }
    const rows = files.map((f) => JSON.parse(readFileSync(`${FAULT_REPORT_DIR}/${f}`, 'utf8')) as FaultRow);
    const header = ['scenario', 'faults injected', 'jobs', 'subscribers checked', 'lost', 'duplicated'];
    const lines = rows.map((r) => [
      r.scenario,
      r.faults,
      String(r.jobs),
      String(r.subscribersChecked),
      String(r.lost),
      String(r.duplicated),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const fmt = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
    const out = [fmt(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(fmt)];
    process.stdout.write(`\nfault suite\n${out.join('\n')}\n`);
  };
}

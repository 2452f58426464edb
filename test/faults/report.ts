import { mkdirSync, writeFileSync } from 'node:fs';
import { ARTIFACTS_DIR } from '../support/log-archive.js';

/** One scenario's line in the fault suite's closing table. */
export interface FaultRow {
  scenario: string;
  /** What was injected, e.g. `5 × SIGKILL of a worker`. */
  faults: string;
  faultCount: number;
  jobs: number;
  subscribersChecked: number;
  lost: number;
  duplicated: number;
}

export const FAULT_REPORT_DIR = `${ARTIFACTS_DIR}/faults`;

/** Records a scenario's counts for the table printed when the suite ends. */
export function recordFaultRow(row: FaultRow): void {
  mkdirSync(FAULT_REPORT_DIR, { recursive: true });
  writeFileSync(
    `${FAULT_REPORT_DIR}/${row.scenario.replace(/[^a-z0-9-]+/gi, '-')}.json`,
    JSON.stringify(row),
  );
}

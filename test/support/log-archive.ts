import { appendFileSync, mkdirSync } from 'node:fs';

/**
 * Where a test run keeps what it leaves behind: `test-artifacts/`, or `TEST_ARTIFACTS_DIR` for a
 * run beside another (CI runs the 10-minute crash scenario beside the main suite, .ci/run), so
 * that neither clears nor searches the other's logs.
 */
export const ARTIFACTS_DIR = process.env.TEST_ARTIFACTS_DIR || 'test-artifacts';

/** Every log line a test run produced lands here, for the secret search at its end. */
export const LOG_ARCHIVE_DIR = `${ARTIFACTS_DIR}/logs`;

/**
 * Keeps `text` (a process's output, or lines of an in-process logger) for the secret search that
 * ends the run (test/support/setup/secret-search.ts). `source` names where it came from, never its arguments.
 */
export function archiveLog(source: string, text: string): void {
  if (text === '') return;
  mkdirSync(LOG_ARCHIVE_DIR, { recursive: true });
  appendFileSync(
    `${LOG_ARCHIVE_DIR}/${process.pid}.log`,
    `## ${source}\n${text.endsWith('\n') ? text : `${text}\n`}`,
  );
}

import { appendFileSync, mkdirSync } from 'node:fs';

/** Every log line a test run produced lands here, for the secret search at its end. */
export const LOG_ARCHIVE_DIR = 'test-artifacts/logs';

/**
 * Keeps `text` (a process's output, or lines of an in-process logger) for the secret search that
 * ends the run (test/setup/secret-search.ts). `source` names where it came from, never its arguments.
 */
export function archiveLog(source: string, text: string): void {
  if (text === '') return;
  mkdirSync(LOG_ARCHIVE_DIR, { recursive: true });
  appendFileSync(
    `${LOG_ARCHIVE_DIR}/${process.pid}.log`,
    `## ${source}\n${text.endsWith('\n') ? text : `${text}\n`}`,
  );
}

import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { secretsIn } from '../../faults/secrets.js';
import { ADMIN_TOKEN, API_KEY, TEST_TOKEN_KEY } from '../fixtures.js';
import { LOG_ARCHIVE_DIR } from '../log-archive.js';

/**
 * Every log line of the run (each CLI process's output, each captured in-process logger; see
 * test/support/log-archive.ts) is searched when the run ends for the API key, the admin token, card tokens
 * (the sandbox's are 32 hex digits, the fixtures' `tok` and 29 digits) and anything shaped like a
 * full card number. One hit fails the run, naming the file and line, never the value.
 */
export default function setup() {
  rmSync(LOG_ARCHIVE_DIR, { recursive: true, force: true });
  return () => {
    let files: string[] = [];
    try {
      files = readdirSync(LOG_ARCHIVE_DIR).filter((f) => f.endsWith('.log'));
    } catch {
      return;
    }
    const logs = files.map((f) => readFileSync(`${LOG_ARCHIVE_DIR}/${f}`, 'utf8'));
    const lines = logs.reduce((n, log) => n + log.split('\n').length, 0);
    const found = secretsIn(logs, {
      apiKey: API_KEY,
      adminToken: ADMIN_TOKEN,
      otherSecrets: [TEST_TOKEN_KEY],
      cardTokenShapes: true,
    }).map((hit) =>
      hit.replace(/^log (\d+)/, (_, n: string) => `${LOG_ARCHIVE_DIR}/${files[Number(n) - 1]}`),
    );
    if (found.length > 0) {
      // Vitest reports an error thrown here but still exits 0: the exit code is set by hand.
      process.exitCode = 1;
      process.stderr.write(
        `\nsecret search FAILED: ${found.length} hit(s) in the run's logs:\n${found.slice(0, 20).join('\n')}\n`,
      );
      return;
    }
    process.stdout.write(`\nsecret search: ${lines} log lines searched, no secret found\n`);
  };
}

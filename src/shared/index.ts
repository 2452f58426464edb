// What every concept of src/ uses: errors, time, redaction, card numbers, lines, shutdown
// and the version. It loads no package, so the tracing preload may import it (src/tracing/preload.ts).

export { containsCardNumber, maskCardNumbers } from './card-number.js';
export { CliError, ConfigError } from './errors.js';
export { type Line, MAX_LINE_BYTES, readLines } from './lines.js';
export { redactExcerpt } from './redact.js';
export { onShutdown } from './shutdown.js';
export {
  DURATION_UNITS,
  durationHint,
  durationMs,
  formatDuration,
  formatTime,
  type Moment,
  toDate,
} from './time.js';
export { packageVersion } from './version.js';

import { type DestinationStream, type Logger, pino } from 'pino';
import pretty from 'pino-pretty';

// The logs: one pino logger a process, JSON lines on standard error (readable text at a terminal),
// secrets redacted (docs/configuration.md, `LOG_LEVEL`). Kept apart from src/shared/ because it loads pino, which the tracing
// preload (src/tracing/preload.ts) must not load before its instrumentation is in place.

export type { Logger };

/** pino's levels, as `LOG_LEVEL` takes them. */
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/**
 * Every path where a secret could sit in a log object. Secrets are also kept out of messages at
 * the source (errors are built without values); these paths are the second line of defence.
 */
const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'cardToken',
  '*.cardToken',
  '*[*].cardToken',
  'card_token',
  '*.card_token',
  'token',
  '*.token',
  'adminToken',
  '*.adminToken',
  'adminReadToken',
  '*.adminReadToken',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'password',
  '*.password',
];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** pino level. Default `info`. */
  level?: LogLevel;
  /** Where lines go. Default standard error, so that command output on standard out stays clean. */
  destination?: DestinationStream;
  /**
   * Readable text instead of JSON lines: for a person at a terminal. Default: when standard error is
   * a terminal (and no destination is given). Redaction applies either way.
   */
  pretty?: boolean;
}

/** The one root logger of a process; modules take children of it. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      name: 'cards-sync',
      level: options.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
    },
    (options.pretty ?? (options.destination === undefined && process.stderr.isTTY === true))
      ? pretty({
          destination: options.destination ?? 2,
          sync: true,
          colorize: options.destination === undefined,
          ignore: 'pid,hostname,name',
          translateTime: 'SYS:HH:MM:ss',
        })
      : (options.destination ?? pino.destination({ fd: 2, sync: true })),
  );
}

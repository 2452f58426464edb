import { z } from 'zod';
import { DURATION_UNITS, durationHint, durationMs } from '../shared/index.js';
import { redisVariables } from './redis.js';
import { blankToUndefined, isTimeZone, text, urlOf, type VariableSpec, whole } from './schemas.js';
import { tokenVariables } from './tokens.js';

// The environment variables cards-sync reads, each with its schema: the table loadConfig
// validates an environment against, and the list the docs are checked against.

const RATIO = z.preprocess(
  blankToUndefined,
  z
    .string()
    .regex(/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/)
    .transform(Number)
    .optional(),
);

/**
 * Every variable of docs/configuration.md: its schema, what a good value looks like (for the error line),
 * whether its value may be echoed back (never for secrets or URLs that may carry a password), and
 * whether the fleet must share it (src/fleet/shared-settings.ts publishes and compares those).
 */
export const variables = {
  DATABASE_URL: {
    schema: urlOf('postgres:', 'postgresql:'),
    expect: 'a URL like postgres://user@host:5432/db',
    echo: false,
    fleet: 'own',
  },
  DATABASE_TIMEOUT_MS: {
    schema: whole(1000, 3_600_000),
    expect: 'a whole number of milliseconds from 1000 to 3600000',
    echo: true,
    fleet: 'own',
  },
  REDIS_URL: {
    schema: urlOf('redis:', 'rediss:'),
    expect: 'a URL like redis://host:6379',
    echo: false,
    fleet: 'own',
  },
  ...redisVariables,
  ...tokenVariables,
  CARDS_API_BASE_URL: {
    schema: urlOf('http:', 'https:'),
    expect: 'an http(s) URL like https://api.example.com',
    echo: false,
    fleet: 'own',
  },
  CARDS_API_KEY: {
    // The key goes into an HTTP header: refuse what a header cannot carry rather than fail per request.
    schema: text.refine((v) => v === undefined || /^[\x21-\x7e]+$/.test(v)),
    expect: 'printable ASCII without spaces (it is sent in the Authorization header)',
    echo: false,
    fleet: 'own',
  },
  CARDS_API_KEY_FILE: {
    schema: text,
    expect: 'the path of a file holding the API key',
    echo: true,
    fleet: 'own',
  },
  CARDS_API_PATH_STYLE: {
    schema: z.preprocess(blankToUndefined, z.enum(['standard', 'sandbox']).optional()),
    expect: 'standard or sandbox',
    echo: true,
    fleet: 'own',
  },
  CARDS_API_TIMEOUT_MS: {
    schema: whole(1, 600_000),
    expect: 'a whole number of milliseconds from 1 to 600000',
    echo: true,
    fleet: 'own',
  },
  SYNC_CONCURRENCY: {
    schema: whole(1, 1000),
    expect: 'a whole number of jobs from 1 to 1000',
    echo: true,
    fleet: 'own',
  },
  SYNC_RATE_LIMIT_PER_SEC: {
    schema: whole(0, 100_000),
    expect: 'a whole number of requests per second from 0 (no limit) to 100000',
    echo: true,
    fleet: 'shared',
  },
  SYNC_ATTEMPTS: {
    schema: whole(1, 100),
    expect: 'a whole number of attempts from 1 to 100',
    echo: true,
    fleet: 'shared',
  },
  SYNC_GONE_AFTER_NOT_FOUND: {
    schema: whole(0, 1000),
    expect: 'a whole number of not_found answers from 0 (never) to 1000',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_CRON: {
    schema: text.refine(
      (v) => v === undefined || (v.split(/\s+/).length === 5 && /^[\d*/,\-A-Za-z?LW#\s]+$/.test(v)),
    ),
    expect: 'a 5-field cron expression such as "0 2 * * *"',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_MAX_WIPE_RATIO: {
    schema: RATIO,
    expect: 'a ratio from 0 to 1, such as 0.2',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_MODE: {
    schema: z.preprocess(blankToUndefined, z.enum(['nightly', 'continuous']).optional()),
    expect: 'nightly or continuous',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_BUDGET_PER_SEC: {
    schema: z.preprocess(
      blankToUndefined,
      z
        .string()
        .regex(/^\d{1,6}(\.\d{1,6})?$/)
        .transform(Number)
        .pipe(z.number().positive().max(100_000))
        .optional(),
    ),
    expect: 'requests per second above 0, such as 80 or 0.5',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_MAX_AGE: {
    schema: text.refine((v) => v === undefined || (durationMs(v) ?? 0) >= 1000),
    expect: `a duration of at least 1s in ${DURATION_UNITS}, such as 90s, 15m, 36h or 7d`,
    echo: true,
    fleet: 'shared',
    explain: (raw) => (/[SMHDW]$/.test(raw) ? durationHint(raw) : undefined),
  },
  REFRESH_AUDIT_SHARE: {
    schema: RATIO,
    expect: 'a ratio from 0 to 1, such as 0.02',
    echo: true,
    fleet: 'shared',
  },
  SYNC_RUNS_RETENTION_DAYS: {
    schema: whole(1, 36_500),
    expect: 'a whole number of days from 1 to 36500',
    echo: true,
    fleet: 'shared',
  },
  CHANGE_EVENTS: {
    schema: z.preprocess(
      (v) => (typeof v === 'string' ? blankToUndefined(v)?.toString().toLowerCase() : v),
      z.enum(['on', 'off']).optional(),
    ),
    expect: 'on or off',
    echo: true,
    // A fleet that disagrees writes events for some syncs and not others: a feed with holes.
    fleet: 'shared',
  },
  CHANGE_EVENTS_RETENTION_DAYS: {
    schema: whole(1, 36_500),
    expect: 'a whole number of days from 1 to 36500',
    echo: true,
    fleet: 'shared',
  },
  REFRESH_TZ: {
    schema: text.refine((v) => v === undefined || isTimeZone(v)),
    expect: 'an IANA time zone such as UTC or Europe/Istanbul',
    echo: true,
    fleet: 'shared',
  },
  QUEUE_PREFIX: {
    schema: text.refine((v) => v === undefined || /^[\w{}:.-]{1,64}$/.test(v)),
    expect: 'at most 64 letters, digits or _ - . : { }',
    echo: true,
    fleet: 'shared',
  },
  WEBHOOK_ALLOW_PRIVATE: {
    schema: z.preprocess(blankToUndefined, z.enum(['true', 'false']).optional()),
    expect: 'true or false',
    echo: true,
    // A fleet that disagrees delivers to a private endpoint from some workers and not others.
    fleet: 'shared',
  },
  WEBHOOK_TIMEOUT_MS: {
    schema: whole(100, 120_000),
    expect: 'a whole number of milliseconds from 100 to 120000',
    echo: true,
    fleet: 'own',
  },
  ADMIN_HOST: {
    schema: text.refine((v) => v === undefined || /^[\w.:[\]-]{1,253}$/.test(v)),
    expect: 'a host name or IP address',
    echo: true,
    fleet: 'own',
  },
  ADMIN_PORT: { schema: whole(0, 65_535), expect: 'a port number from 0 to 65535', echo: true, fleet: 'own' },
  ADMIN_TOKEN: {
    schema: text.refine((v) => v === undefined || /^[\x21-\x7e]{16,}$/.test(v)),
    expect: 'at least 16 printable characters without spaces; generate one with `openssl rand -hex 24`',
    echo: false,
    fleet: 'own',
  },
  ADMIN_READ_TOKEN: {
    schema: text.refine((v) => v === undefined || /^[\x21-\x7e]{16,}$/.test(v)),
    expect: 'at least 16 printable characters without spaces; generate one with `openssl rand -hex 24`',
    echo: false,
    fleet: 'own',
  },
  LOG_LEVEL: {
    schema: z.preprocess(
      blankToUndefined,
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
    ),
    expect: 'one of fatal, error, warn, info, debug, trace, silent',
    echo: true,
    fleet: 'own',
  },
} as const satisfies Record<string, VariableSpec>;

export type Variables = typeof variables;

/** Every environment variable cards-sync reads (docs/configuration.md and the later additions). */
export const CONFIG_VARIABLES = Object.keys(variables) as (keyof Variables)[];

export const envSchema = z.object(
  Object.fromEntries(Object.entries(variables).map(([name, v]) => [name, v.schema])) as {
    [K in keyof Variables]: Variables[K]['schema'];
  },
);

export type Parsed = z.output<typeof envSchema>;

import type { LogLevel } from '../logging/index.js';
import { ConfigError, durationMs } from '../shared/index.js';
import { readApiKeyFile } from './api-key.js';
import { type RedisConfig, redisTopology } from './redis.js';
import type { VariableSpec } from './schemas.js';
import { type TokenConfig, tokenConfig } from './tokens.js';
import { CONFIG_VARIABLES, envSchema, type Parsed, type Variables, variables } from './variables.js';

// The configuration (docs/configuration.md): every variable, read and checked in one place, and
// what the commands require of it (the API, the card tokens' keys, the Redis topology).

export type { HostPort, RedisConfig } from './redis.js';
export { HOW_TO_MAKE_A_KEY, requireCardTokens } from './tokens.js';
export type { Variables } from './variables.js';
export { CONFIG_VARIABLES };

type PathStyle = 'standard' | 'sandbox';
type RefreshMode = 'nightly' | 'continuous';

/** Settings of the Saved Cards API client. */
export interface ApiConfig {
  /** `CARDS_API_BASE_URL`: origin (and optional path prefix) of the API, no default. */
  baseUrl: string;
  /** `CARDS_API_KEY` or the content of `CARDS_API_KEY_FILE`; a secret, never logged. */
  apiKey: string;
  /** `CARDS_API_PATH_STYLE`: `standard` (default) or `sandbox` (paths without `subscriber`). */
  pathStyle: PathStyle;
  /** `CARDS_API_TIMEOUT_MS`: whole-request deadline in ms. Default 10000. */
  timeoutMs: number;
}

/** Webhook delivery settings. */
interface WebhookConfig {
  /** `WEBHOOK_ALLOW_PRIVATE`: endpoints may resolve to loopback, private or link-local addresses. Default false. */
  allowPrivate: boolean;
  /** `WEBHOOK_TIMEOUT_MS`: one delivery's whole deadline in ms. Default 10000. */
  timeoutMs: number;
}

/** The whole validated configuration of a cards-sync process (docs/configuration.md). */
export interface Config {
  /** `DATABASE_URL`. Default `postgres://postgres:postgres@127.0.0.1:5432/cards_sync`. */
  databaseUrl: string;
  /**
   * `DATABASE_TIMEOUT_MS`: Postgres cancels a statement that runs this long and ends a transaction
   * left idle this long; a query with no answer at all 5 s later fails and its connection is
   * replaced. The refresh job's own queries (a whole run's counts) get ten times as long. Default 30000.
   */
  databaseTimeoutMs: number;
  /** `REDIS_URL`. Default `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The Redis topology (`REDIS_URL` with `REDIS_SENTINELS…` or `REDIS_CLUSTER_NODES`, TLS). */
  redis: RedisConfig;
  /** API settings; `undefined` when `CARDS_API_BASE_URL` and the key are both unset. */
  api: ApiConfig | undefined;
  /** `SYNC_CONCURRENCY`: jobs in flight per worker process. Default 16. */
  syncConcurrency: number;
  /** `SYNC_RATE_LIMIT_PER_SEC`: API requests per second across all workers; 0 = none (default). */
  syncRateLimitPerSec: number;
  /** `SYNC_ATTEMPTS`: attempts for transient failures. Default 5. */
  syncAttempts: number;
  /**
   * `SYNC_GONE_AFTER_NOT_FOUND`: consecutive `not_found` answers after which a subscriber's active
   * cards are marked removed; 0 = never. Default 3.
   */
  syncGoneAfterNotFound: number;
  /** `REFRESH_CRON`: nightly refresh schedule, 5-field cron. Default `0 2 * * *`. */
  refreshCron: string;
  /** `REFRESH_TZ`: time zone of the schedule. Default `UTC`. */
  refreshTz: string;
  /** `REFRESH_MAX_WIPE_RATIO`: share of wiped subscribers that halts a refresh. Default 0.2. */
  refreshMaxWipeRatio: number;
  /** `REFRESH_MODE`: the nightly sweep, or the continuous refresh. Default `nightly`. */
  refreshMode: RefreshMode;
  /**
   * `REFRESH_BUDGET_PER_SEC`: requests a second the continuous refresh spends. Default 80% of
   * `SYNC_RATE_LIMIT_PER_SEC`; null when neither is set (nightly mode only).
   */
  refreshBudgetPerSec: number | null;
  /** `REFRESH_MAX_AGE` in ms: nobody goes longer without a successful sync. Default 7 days. */
  refreshMaxAgeMs: number;
  /** `REFRESH_AUDIT_SHARE`: share of the refresh budget spent on uniform random re-syncs. Default 0.02. */
  refreshAuditShare: number;
  /** `SYNC_RUNS_RETENTION_DAYS`: `sync_runs` older than this are pruned nightly. Default 90. */
  syncRunsRetentionDays: number;
  /**
   * `CHANGE_EVENTS`: `on` writes every change a sync makes as a change event, in its transaction;
   * `off` (default) writes none, so a deployment that only reports pays nothing for the outbox.
   */
  changeEvents: 'on' | 'off';
  /**
   * `CHANGE_EVENTS_RETENTION_DAYS`: change events older than this are dropped a whole day
   * (partition) at a time; the feed and replays reach no further back. Default 30.
   */
  changeEventsRetentionDays: number;
  /** `QUEUE_PREFIX`: BullMQ key prefix. Default `bull`. */
  queuePrefix: string;
  /** `ADMIN_HOST`. Default `127.0.0.1`. */
  adminHost: string;
  /** `ADMIN_PORT`. Default 3000. */
  adminPort: number;
  /** `ADMIN_TOKEN`: the operator token of the admin server (pages, reads, writes); unset = those routes are off. */
  adminToken: string | undefined;
  /** `ADMIN_READ_TOKEN`: a token that may look (pages, reads, Bull Board read-only) but not act. */
  adminReadToken: string | undefined;
  /** Webhook delivery (docs/configuration.md, docs/webhooks.md). */
  webhooks: WebhookConfig;
  /** Card tokens at rest: `CARD_TOKEN_ENCRYPTION` and the key ring. */
  tokens: TokenConfig;
  /** `LOG_LEVEL`: pino level. Default `info`. */
  logLevel: LogLevel;
}

/** `REFRESH_MAX_AGE` when it is not set: 7 days. */
export const DEFAULT_REFRESH_MAX_AGE_MS = 7 * 86_400_000;
/** `DATABASE_URL` when it is not set. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync';
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

type Env = Record<string, string | undefined>;

/** How {@link loadConfig} treats what only the refresh reads. */
export interface LoadOptions {
  /**
   * For a command that does not run the refresh (all but `worker` and `refresh`): a malformed
   * `REFRESH_*` setting is said in one line through `warn`, and the command goes on without it (its
   * default stands in). Unset (the default): refused like any other variable, exit 2.
   */
  refreshUnused?: { warn: (line: string) => void };
}

/** The variables only the refresh reads: a command that does not run it can go on without them. */
const readByTheRefreshOnly = (name: string) => name.startsWith('REFRESH_');

function refusal(env: Env, name: keyof Variables): ConfigError {
  const spec: VariableSpec = variables[name];
  const raw = env[name]?.trim() ?? '';
  // JSON quoting keeps the message on one line whatever the value holds.
  const got = spec.echo ? ` (got ${JSON.stringify(raw.slice(0, 60))})` : '';
  const more = spec.echo ? spec.explain?.(raw) : undefined;
  return new ConfigError(`${name} must be ${spec.expect}${got}${more ? `: ${more}` : ''}`, name);
}

/**
 * The OTLP endpoint variable whose value is no URL at all (`htp:/bad url`), if one is: an http(s)
 * URL with a host is one, and so is `host:port` (the gRPC exporter's form; under HTTP the worker and
 * `doctor` say how to write it, src/tracing/wanted.ts `endpointProblems`). The SDK would pass over
 * anything else in silence.
 */
function malformedOtlpEndpoint(env: Env): string | undefined {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT']) {
    const value = env[name]?.trim();
    if (!value) continue;
    const url = URL.parse(value);
    const httpUrl = url !== null && /^https?:$/.test(url.protocol) && url.host !== '';
    const hostPort = /^[\w.-]+:\d+(\/\S*)?$/.test(value);
    if (/\s/.test(value) || !(httpUrl || hostPort)) return name;
  }
  return undefined;
}

/**
 * Turns an environment into one validated {@link Config}. Rejects bad values rather than falling
 * back to defaults; throws {@link ConfigError} with one line naming the first bad variable.
 */
export function loadConfig(env: Env, o: LoadOptions = {}): Config {
  const refuse = (error: ConfigError) => {
    if (o.refreshUnused === undefined || !readByTheRefreshOnly(error.variable)) throw error;
    o.refreshUnused.warn(
      `cards-sync: warning: ${error.message}; this command does not run the refresh and goes on without it, ` +
        'but the worker and `cards-sync refresh` refuse to start until it is fixed',
    );
  };
  let input = env;
  let result = envSchema.safeParse(input);
  while (!result.success) {
    const name = String(result.error.issues[0]?.path[0]) as keyof Variables;
    refuse(refusal(input, name));
    input = { ...input, [name]: undefined };
    result = envSchema.safeParse(input);
  }
  const e: Parsed = result.data;
  if (e.CARDS_API_KEY !== undefined && e.CARDS_API_KEY_FILE !== undefined) {
    throw new ConfigError('set only one of CARDS_API_KEY and CARDS_API_KEY_FILE, not both', 'CARDS_API_KEY');
  }
  const malformed = malformedOtlpEndpoint(env);
  if (malformed !== undefined) {
    throw new ConfigError(
      `${malformed} must be a URL such as http://collector:4318 (got a value that is not one; not shown, it may hold a token): traces would go nowhere`,
      malformed,
    );
  }
  const apiKey = e.CARDS_API_KEY_FILE !== undefined ? readApiKeyFile(e.CARDS_API_KEY_FILE) : e.CARDS_API_KEY;
  if (e.ADMIN_READ_TOKEN !== undefined && e.ADMIN_READ_TOKEN === e.ADMIN_TOKEN) {
    throw new ConfigError(
      'ADMIN_READ_TOKEN must differ from ADMIN_TOKEN: the read token may only look',
      'ADMIN_READ_TOKEN',
    );
  }
  const refreshMode = e.REFRESH_MODE ?? 'nightly';
  const rateLimit = e.SYNC_RATE_LIMIT_PER_SEC ?? 0;
  const refreshBudgetPerSec = e.REFRESH_BUDGET_PER_SEC ?? (rateLimit > 0 ? rateLimit * 0.8 : null);
  if (refreshMode === 'continuous' && refreshBudgetPerSec === null) {
    refuse(
      new ConfigError(
        'REFRESH_BUDGET_PER_SEC must be set with REFRESH_MODE=continuous when SYNC_RATE_LIMIT_PER_SEC is 0: the continuous refresh spends a budget around the clock',
        'REFRESH_BUDGET_PER_SEC',
      ),
    );
  }
  if (rateLimit > 0 && refreshBudgetPerSec !== null && refreshBudgetPerSec > rateLimit) {
    refuse(
      new ConfigError(
        `REFRESH_BUDGET_PER_SEC must not exceed SYNC_RATE_LIMIT_PER_SEC ${rateLimit} (got ${refreshBudgetPerSec}): the refresh would take the ops lane's share`,
        'REFRESH_BUDGET_PER_SEC',
      ),
    );
  }
  const baseUrl = e.CARDS_API_BASE_URL;
  const redisUrl = e.REDIS_URL ?? DEFAULT_REDIS_URL;
  const queuePrefix = e.QUEUE_PREFIX ?? 'bull';
  return {
    databaseUrl: e.DATABASE_URL ?? DEFAULT_DATABASE_URL,
    databaseTimeoutMs: e.DATABASE_TIMEOUT_MS ?? 30_000,
    redisUrl,
    redis: redisTopology({ ...e, url: redisUrl, queuePrefix }),
    api:
      baseUrl === undefined && apiKey === undefined
        ? undefined
        : {
            baseUrl: baseUrl ?? '',
            apiKey: apiKey ?? '',
            pathStyle: e.CARDS_API_PATH_STYLE ?? 'standard',
            timeoutMs: e.CARDS_API_TIMEOUT_MS ?? 10_000,
          },
    syncConcurrency: e.SYNC_CONCURRENCY ?? 16,
    syncRateLimitPerSec: e.SYNC_RATE_LIMIT_PER_SEC ?? 0,
    syncAttempts: e.SYNC_ATTEMPTS ?? 5,
    syncGoneAfterNotFound: e.SYNC_GONE_AFTER_NOT_FOUND ?? 3,
    refreshCron: e.REFRESH_CRON?.split(/\s+/).join(' ') ?? '0 2 * * *',
    refreshTz: e.REFRESH_TZ ?? 'UTC',
    refreshMaxWipeRatio: e.REFRESH_MAX_WIPE_RATIO ?? 0.2,
    refreshMode,
    refreshBudgetPerSec,
    refreshMaxAgeMs:
      e.REFRESH_MAX_AGE !== undefined ? durationMs(e.REFRESH_MAX_AGE)! : DEFAULT_REFRESH_MAX_AGE_MS,
    refreshAuditShare: e.REFRESH_AUDIT_SHARE ?? 0.02,
    syncRunsRetentionDays: e.SYNC_RUNS_RETENTION_DAYS ?? 90,
    changeEvents: e.CHANGE_EVENTS ?? 'off',
    changeEventsRetentionDays: e.CHANGE_EVENTS_RETENTION_DAYS ?? 30,
    queuePrefix,
    adminHost: e.ADMIN_HOST ?? '127.0.0.1',
    adminPort: e.ADMIN_PORT ?? 3000,
    adminToken: e.ADMIN_TOKEN,
    adminReadToken: e.ADMIN_READ_TOKEN,
    webhooks: { allowPrivate: e.WEBHOOK_ALLOW_PRIVATE === 'true', timeoutMs: e.WEBHOOK_TIMEOUT_MS ?? 10_000 },
    tokens: tokenConfig(e),
    logLevel: e.LOG_LEVEL ?? 'info',
  };
}

/** The API settings, for commands that call the API; throws {@link ConfigError} when incomplete. */
export function requireApi(config: Config): ApiConfig {
  const api = config.api;
  if (api === undefined || api.baseUrl === '') {
    throw new ConfigError(
      'CARDS_API_BASE_URL is not set; set it to the API origin, e.g. https://api.example.com',
      'CARDS_API_BASE_URL',
    );
  }
  if (api.apiKey === '') {
    throw new ConfigError(
      'CARDS_API_KEY is not set; set CARDS_API_KEY or CARDS_API_KEY_FILE (a file holding the key)',
      'CARDS_API_KEY',
    );
  }
  return api;
}

import type { Config, Variables } from '../config/index.js';
import { durationMs, formatDuration } from '../shared/index.js';

/** A duration in the shortest form it reads back exactly: `2m`, `7d`, and `1.5s` below a whole second. */
const exactDuration = (ms: number) => (ms % 1000 === 0 ? formatDuration(ms / 1000) : `${ms / 1000}s`);

// The settings every worker of the fleet must share: each variable that
// src/config declares `fleet: 'shared'`, published by every process in `fleet_processes.settings`
// under the variable's own name, and compared wherever SETTINGS DIFFER shows (the worker's start,
// status, doctor, the overview, /metrics).

/** A variable declared `fleet: 'shared'` in src/config/variables.ts (or redis.ts, tokens.ts). */
export type SharedVariable = {
  [K in keyof Variables]: Variables[K]['fleet'] extends 'shared' ? K : never;
}[keyof Variables];

/** A published value: the setting in effect (its default applied); null where it has no effect. */
export type SettingValue = string | number | null;

/**
 * How each shared variable is published. The type asks for exactly one entry per variable declared
 * shared: one declared shared cannot be forgotten here, nor one declared `own` slip in.
 */
const published: { [K in SharedVariable]: (c: Config) => SettingValue } = {
  SYNC_RATE_LIMIT_PER_SEC: (c) => c.syncRateLimitPerSec,
  SYNC_ATTEMPTS: (c) => c.syncAttempts,
  SYNC_GONE_AFTER_NOT_FOUND: (c) => c.syncGoneAfterNotFound,
  // The schedule only drives the nightly mode; the budget and the audit only the continuous one.
  REFRESH_CRON: (c) => (c.refreshMode === 'nightly' ? c.refreshCron : null),
  REFRESH_TZ: (c) => (c.refreshMode === 'nightly' ? c.refreshTz : null),
  REFRESH_MODE: (c) => c.refreshMode,
  REFRESH_BUDGET_PER_SEC: (c) => (c.refreshMode === 'continuous' ? c.refreshBudgetPerSec : null),
  REFRESH_AUDIT_SHARE: (c) => (c.refreshMode === 'continuous' ? c.refreshAuditShare : null),
  // As a duration, so that 120s and 2m agree and a person reads it.
  REFRESH_MAX_AGE: (c) => exactDuration(c.refreshMaxAgeMs),
  REFRESH_MAX_WIPE_RATIO: (c) => c.refreshMaxWipeRatio,
  SYNC_RUNS_RETENTION_DAYS: (c) => c.syncRunsRetentionDays,
  CHANGE_EVENTS: (c) => c.changeEvents,
  CHANGE_EVENTS_RETENTION_DAYS: (c) => c.changeEventsRetentionDays,
  QUEUE_PREFIX: (c) => c.queuePrefix,
  // Which kind of Redis, not how each host reaches it: two hosts may name the same nodes differently.
  REDIS_SENTINELS: (c) => (c.redis.topology === 'sentinel' ? 'set' : 'unset'),
  REDIS_SENTINEL_NAME: (c) => c.redis.sentinelName ?? null,
  REDIS_CLUSTER_NODES: (c) => (c.redis.topology === 'cluster' ? 'set' : 'unset'),
  CARD_TOKEN_ENCRYPTION: (c) => c.tokens.encryption,
  WEBHOOK_ALLOW_PRIVATE: (c) => String(c.webhooks.allowPrivate),
};

/** The shared variables, in the order they are compared and shown. */
export const SHARED_VARIABLES = Object.keys(published).sort() as SharedVariable[];

/** What this process publishes: every shared variable's value in effect. */
export function sharedSettings(config: Config): Record<SharedVariable, SettingValue> {
  return Object.fromEntries(SHARED_VARIABLES.map((name) => [name, published[name](config)])) as Record<
    SharedVariable,
    SettingValue
  >;
}

/** Earlier releases published five settings under other names: read them by variable. */
const LEGACY: Record<string, SharedVariable> = {
  rateLimitPerSec: 'SYNC_RATE_LIMIT_PER_SEC',
  refreshMode: 'REFRESH_MODE',
  refreshBudgetPerSec: 'REFRESH_BUDGET_PER_SEC',
  queuePrefix: 'QUEUE_PREFIX',
};

/** A row's settings by variable name, whichever release wrote them. */
export function settingsByVariable(stored: Record<string, unknown> | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(stored ?? {})) {
    if (key === 'redisTopology') {
      out.REDIS_SENTINELS ??= value === 'sentinel' ? 'set' : 'unset';
      out.REDIS_CLUSTER_NODES ??= value === 'cluster' ? 'set' : 'unset';
    } else {
      out[LEGACY[key] ?? key] = value;
    }
  }
  return out;
}

/** A published value for people: `2m`, `40`, `continuous`; `none` where it has no effect. */
export function showSetting(value: unknown): string {
  if (value === null || value === undefined) return 'none';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * The smallest REFRESH_MAX_AGE among `own` and the live workers': the max age the fleet must keep,
 * since a worker reschedules each subscriber it syncs within its own. `heldBy` names the worker
 * when it is not this process's own.
 */
export function strictestMaxAge(
  fleet: readonly { id: string; role: string; settings: Record<string, unknown> }[],
  ownMs: number,
): { ms: number; heldBy: string | null } {
  let strictest = { ms: ownMs, heldBy: null as string | null };
  for (const p of fleet) {
    const raw = p.settings.REFRESH_MAX_AGE;
    const ms = p.role !== 'admin' && typeof raw === 'string' ? durationMs(raw) : undefined;
    if (ms !== undefined && ms < strictest.ms) strictest = { ms, heldBy: p.id };
  }
  return strictest;
}

/**
 * The SYNC_RATE_LIMIT_PER_SEC that paces the queue: the smallest one a live worker publishes (the
 * first to reach its count in BullMQ's limiter window; 0 when every live worker runs without), or
 * `own` when no live worker publishes one. BullMQ keeps no worker's limit in Redis, so a reader
 * such as `status` learns it here rather than from its own environment.
 */
export function fleetRateLimit(
  fleet: readonly { role: string; settings: Record<string, unknown> }[],
  own: number,
): number {
  const limits = fleet
    .filter((p) => p.role !== 'admin')
    .map((p) => p.settings.SYNC_RATE_LIMIT_PER_SEC)
    .filter((v): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0);
  if (limits.length === 0) return own;
  const paced = limits.filter((v) => v > 0);
  return paced.length > 0 ? Math.min(...paced) : 0;
}

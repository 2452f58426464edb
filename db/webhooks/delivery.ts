import type pg from 'pg';

/** How the reason of an endpoint this loop disabled begins (`cards_sync_webhook_endpoint_auto_disabled`). */
export const AUTO_DISABLED_REASON = 'no 2xx since ';

// The database side of delivery: claiming due deliveries (FOR UPDATE SKIP LOCKED, so workers
// share the work without waiting on each other) and recording what an attempt came to.

type Queryable = Pick<pg.Pool, 'query'>;

/** What one webhook POST came to (src/webhooks/deliver-http.ts), as the attempts table records it. */
export interface AttemptResult {
  delivered: boolean;
  /** The HTTP status; null when no answer came. */
  status: number | null;
  latencyMs: number;
  /** `timeout`, `address_refused`, `redirect`, `http_status`, `connect` or null when delivered. */
  errorCode: string | null;
  /** The redacted start of the answer's body, or the error said in a line; never a secret. */
  excerpt: string;
  /** `Retry-After` of a failed answer in ms (seconds or an HTTP date); null when absent. */
  retryAfterMs: number | null;
}

/** A claimed delivery: held by this worker until its lease ends. */
export interface ClaimedDelivery {
  id: number;
  endpointId: number;
  eventId: string;
  subscriberId: number;
  body: string;
  /** This attempt's number, 1 for the first. */
  attempt: number;
  /** The trace context of the sync that wrote the event (null while tracing was off for it). */
  spanContext: string | null;
}

/** The claim ($1 endpoint, $2 limit, $3 worker, $4 lease ms); exported for the plan's test. */
export const CLAIM_DELIVERIES = `with due as (
       select d.id from webhook_deliveries d
       where d.endpoint_id = $1 and d.status = 'pending' and d.next_attempt_at <= now()
         and (d.locked_until is null or d.locked_until < now())
         -- Not once the endpoint is disabled, whatever the loop last read of it.
         and exists (select 1 from webhook_endpoints e where e.id = $1 and e.enabled)
         -- The head of its subscriber's queue: the oldest pending delivery of (endpoint, subscriber),
         -- read from webhook_deliveries_order_idx by one probe. Written as 'no earlier pending one'
         -- (NOT EXISTS), the planner, on statistics taken while nothing was pending, ran the
         -- anti-join against every pending row of the endpoint for each candidate: 6.6 s a claim
         -- at 9,000 pending, 30 ms this way (docs/benchmarks.md, "npm run bench:changes").
         and d.id = (
           select p.id from webhook_deliveries p
           where p.endpoint_id = d.endpoint_id and p.subscriber_id = d.subscriber_id
             and p.status = 'pending'
           order by p.id limit 1)
       -- By the due index's own order, so the scan stops at the limit: with a tie-break on id
       -- as well, every pending row of the endpoint was read and sorted first (37 ms a claim at
       -- 20,000 pending, 0.3 ms this way; docs/benchmarks.md). Ties keep insertion order.
       order by d.next_attempt_at
       limit $2
       for update of d skip locked)
     update webhook_deliveries d
     set locked_by = $3, locked_until = now() + $4 * interval '1 millisecond',
         attempts = d.attempts + 1, first_attempt_at = coalesce(d.first_attempt_at, now())
     from due where d.id = due.id
     returning d.id, d.endpoint_id, d.event_id, d.subscriber_id, d.body, d.attempts, d.tracingspancontext`;

/**
 * Claims up to `limit` due deliveries of one endpoint. A delivery is due when its time has come,
 * no live lease holds it, and no earlier delivery of its (endpoint, subscriber) is still pending:
 * one subscriber's events go out in feed order, a later one waiting while an earlier one is retried.
 * A dead letter is no longer pending, so it stops holding the later ones back.
 */
export async function claimDeliveries(
  db: Queryable,
  o: { endpointId: number; limit: number; workerId: string; leaseMs: number },
): Promise<ClaimedDelivery[]> {
  const { rows } = await db.query(CLAIM_DELIVERIES, [o.endpointId, o.limit, o.workerId, o.leaseMs]);
  return rows
    .map((r) => ({
      id: Number(r.id),
      endpointId: Number(r.endpoint_id),
      eventId: r.event_id,
      subscriberId: Number(r.subscriber_id),
      body: r.body,
      attempt: Number(r.attempts),
      spanContext: r.tracingspancontext,
    }))
    .sort((a, b) => a.id - b.id);
}

export type Finish = 'delivered' | 'retry' | 'dead' | 'lost';

/**
 * Records one attempt and what follows it, in one transaction: delivered; retried after `waitMs`
 * (never later than the dead letter's moment, `giveUpAfterMs` after the first attempt); or dead.
 * The database's clock decides. `lost` when the lease had passed to another worker meanwhile.
 * Returns also whether the endpoint was disabled now for failing `disableAfterMs` on end.
 */
export async function finishAttempt(
  pool: pg.Pool,
  d: ClaimedDelivery,
  o: {
    workerId: string;
    result: AttemptResult;
    waitMs: number;
    giveUpAfterMs: number;
    disableAfterMs: number;
  },
): Promise<{ finish: Finish; disabled: boolean }> {
  const r = o.result;
  if (r.delivered) return { finish: await finishDelivered(pool, d, o.workerId, r), disabled: false };
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(
      `insert into webhook_attempts (delivery_id, endpoint_id, attempt, outcome, status_code, error_code, latency_ms, excerpt)
       values ($1, $2, $3, 'failed', $4, $5, $6, $7)`,
      [d.id, d.endpointId, d.attempt, r.status, r.errorCode, r.latencyMs, r.excerpt],
    );
    const { rows } = await client.query<{ status: string }>(
      `with head as (
         update webhook_deliveries
         set status = case when now() >= first_attempt_at + $4 * interval '1 millisecond' then 'dead' else 'pending' end,
             finished_at = case when now() >= first_attempt_at + $4 * interval '1 millisecond' then now() end,
             next_attempt_at = least(now() + $3 * interval '1 millisecond', first_attempt_at + $4 * interval '1 millisecond'),
             locked_by = null, locked_until = null
         where id = $1 and locked_by = $2
         returning status, first_attempt_at + $4 * interval '1 millisecond' as gives_up_at
       ), behind as (
         -- The subscriber's later deliveries wait with it: moved once, at its first failure, to the
         -- moment it becomes a dead letter at the latest, they stay out of the claim's scan (by
         -- next_attempt_at) instead of being read and passed over at every claim until then. Its
         -- delivery (finishDelivered) or its dead letter (here) makes them due at once.
         update webhook_deliveries b
         set next_attempt_at = case when head.status = 'pending' then head.gives_up_at else now() end
         from head
         where b.endpoint_id = $5 and b.subscriber_id = $6 and b.status = 'pending' and b.id > $1
           and case when head.status = 'pending' then b.next_attempt_at < head.gives_up_at
             else b.next_attempt_at > now() end
       )
       select status from head`,
      [d.id, o.workerId, o.waitMs, o.giveUpAfterMs, d.endpointId, d.subscriberId],
    );
    await client.query(
      'update webhook_endpoints set failing_since = now() where id = $1 and failing_since is null',
      [d.endpointId],
    );
    const off = await client.query(
      `update webhook_endpoints
       set enabled = false, disabled_at = now(),
           disabled_reason = $4 || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
             || ': disabled after failing for ' || $2 || '; fix the receiver, then cards-sync webhooks enable ' || id
       where id = $1 and enabled and failing_since <= now() - $3 * interval '1 millisecond'`,
      [d.endpointId, spanText(o.disableAfterMs), o.disableAfterMs, AUTO_DISABLED_REASON],
    );
    const disabled = off.rowCount === 1;
    await client.query('commit');
    const status = rows[0]?.status;
    return {
      finish: status === undefined ? 'lost' : status === 'pending' ? 'retry' : (status as Finish),
      disabled,
    };
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/**
 * The common case in one statement, one round trip (data-modifying CTEs all run, referenced or
 * not): the attempt recorded, the delivery done if this worker still holds it, the endpoint no
 * longer failing.
 */
async function finishDelivered(
  db: Queryable,
  d: ClaimedDelivery,
  workerId: string,
  r: AttemptResult,
): Promise<Finish> {
  // After a failure its subscriber's later deliveries were moved out (finishAttempt): due now.
  const behind =
    d.attempt > 1
      ? `, behind as (
       update webhook_deliveries b set next_attempt_at = now() from done
       where b.endpoint_id = $2 and b.subscriber_id = $9 and b.status = 'pending' and b.id > $1
         and b.next_attempt_at > now()
     )`
      : '';
  const { rows } = await db.query<{ status: string | null }>(
    `with attempt as (
       insert into webhook_attempts (delivery_id, endpoint_id, attempt, outcome, status_code, error_code, latency_ms, excerpt)
       values ($1, $2, $3, 'delivered', $4, $5, $6, $7)
     ), done as (
       update webhook_deliveries set status = 'delivered', finished_at = now(), locked_by = null, locked_until = null
       where id = $1 and locked_by = $8 returning status
     ), healthy as (
       update webhook_endpoints set failing_since = null where id = $2 and failing_since is not null
     )${behind}
     select (select status from done) as status`,
    [
      d.id,
      d.endpointId,
      d.attempt,
      r.status,
      r.errorCode,
      r.latencyMs,
      r.excerpt,
      workerId,
      ...(d.attempt > 1 ? [d.subscriberId] : []),
    ],
  );
  return rows[0]?.status === 'delivered' ? 'delivered' : 'lost';
}

/** Gives a claimed delivery back untried (the worker is stopping): the attempt is not counted. */
export async function releaseDelivery(db: Queryable, d: ClaimedDelivery, workerId: string): Promise<void> {
  await db.query(
    `update webhook_deliveries set locked_by = null, locked_until = null, attempts = attempts - 1,
       first_attempt_at = case when attempts = 1 then null else first_attempt_at end
     where id = $1 and locked_by = $2`,
    [d.id, workerId],
  );
}

/** The endpoints that take events now. */
export async function enabledEndpointIds(db: Queryable): Promise<number[]> {
  const { rows } = await db.query<{ id: string }>(
    'select id from webhook_endpoints where enabled order by id',
  );
  return rows.map((r) => Number(r.id));
}

/**
 * Drops up to `limit` finished deliveries (and their attempts) older than `retentionDays`: the
 * history of what was sent lives as long as the events themselves (`CHANGE_EVENTS_RETENTION_DAYS`).
 */
export async function pruneDeliveries(db: Queryable, retentionDays: number, limit = 10_000): Promise<number> {
  const { rowCount } = await db.query(
    `delete from webhook_deliveries where id in (
       select id from webhook_deliveries
       where status <> 'pending' and finished_at < now() - $1 * interval '1 day'
       limit $2
       -- Workers pruning at once take different rows rather than wait on each other's.
       for update skip locked)`,
    [retentionDays, limit],
  );
  return rowCount ?? 0;
}

/**
 * The retention of removed endpoints (`webhooks remove`): once removed more than `retentionDays`
 * ago, up to `limit` of their deliveries are dropped (the pending ones, never sent, the finished
 * ones pruneDeliveries has not dropped yet), and an endpoint with none left goes too.
 */
export async function pruneRemovedEndpoints(
  db: Queryable,
  retentionDays: number,
  limit = 10_000,
): Promise<number> {
  const { rowCount } = await db.query(
    `delete from webhook_deliveries where id in (
       select d.id from webhook_endpoints e join webhook_deliveries d on d.endpoint_id = e.id
       where e.removed_at < now() - $1 * interval '1 day'
       limit $2
       for update of d skip locked)`,
    [retentionDays, limit],
  );
  await db.query(
    `delete from webhook_endpoints e
     where e.removed_at < now() - $1 * interval '1 day'
       and not exists (select 1 from webhook_deliveries d where d.endpoint_id = e.id)`,
    [retentionDays],
  );
  return rowCount ?? 0;
}

/** `5 days`, `36 h`, `0.4 s`: how long, for a reason a person reads. */
function spanText(ms: number): string {
  if (ms >= 86_400_000) return `${Math.round(ms / 86_400_000)} days`;
  if (ms >= 3_600_000) return `${Math.round(ms / 3_600_000)} h`;
  return `${ms / 1000} s`;
}

/**
 * What `webhooks retry` does: every delivery of endpoint `id` waiting out its backoff is due now,
 * so that a receiver that has come back gets them at the next claim rather than after its backoff
 * (those behind their subscriber's head go with it: the claim takes each subscriber's oldest first).
 * Undefined when there is no such endpoint (or it was removed); `disabled` when it is, and then
 * nothing is changed (`webhooks enable` sends what waited).
 */
export async function retryWaitingNow(
  db: Queryable,
  id: number,
): Promise<{ retried: number } | { disabled: true } | undefined> {
  const { rows } = await db.query<{ enabled: boolean }>(
    'select enabled from webhook_endpoints where id = $1 and removed_at is null',
    [id],
  );
  if (rows[0] === undefined) return undefined;
  if (!rows[0].enabled) return { disabled: true };
  const { rowCount } = await db.query(
    `update webhook_deliveries set next_attempt_at = now()
     where endpoint_id = $1 and status = 'pending' and next_attempt_at > now()`,
    [id],
  );
  return { retried: rowCount ?? 0 };
}

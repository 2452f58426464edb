import type pg from 'pg';

// The statements on webhook endpoints (db/schema/webhooks.ts). Their secrets come and go sealed:
// sealing and opening them under the key ring is src/webhooks/endpoint-secrets.ts's.

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.ClientBase, 'query'>;

export interface EndpointRow {
  id: number;
  url: string;
  description: string;
  eventTypes: string[] | null;
  enabled: boolean;
  disabledReason: string | null;
  createdAt: Date;
  failingSince: Date | null;
  /**
   * Events waiting for it, enabled or not: its pending deliveries and the events of its types past
   * its place in the feed (not taken yet: all of them while it is disabled). Counted up to
   * {@link PENDING_COUNT_CAP} of each; `pendingCapped` then says more may wait.
   */
  pending: number;
  pendingCapped: boolean;
  deadLetters: number;
  /** Age in seconds of the oldest event waiting for it (as `pending` counts them); 0 when none waits. */
  lagSeconds: number;
}

/**
 * Waiting events counted at most, of each kind: an endpoint disabled for days may have millions
 * past its place, and `list`, `status`, the ops page and every scrape read this.
 */
const PENDING_COUNT_CAP = 10_000;

/** Inserts an endpoint with no secret yet (the sealed one names its id); returns its id. */
export async function insertEndpointRow(
  client: Queryable,
  o: { url: string; description: string; eventTypes: string[] | null; feedCursor: string },
): Promise<number> {
  const { rows } = await client.query<{ id: number }>(
    `insert into webhook_endpoints (url, description, event_types, secret, feed_cursor)
       values ($1, $2, $3, '', $4) returning id`,
    [o.url, o.description, o.eventTypes, o.feedCursor],
  );
  return Number(rows[0]!.id);
}

/** Sets the (sealed) secret of the endpoint just inserted. */
export async function setEndpointSecret(client: Queryable, id: number, sealed: string): Promise<void> {
  await client.query('update webhook_endpoints set secret = $2 where id = $1', [id, sealed]);
}

// What waits for each endpoint. Its pending deliveries (taken from the feed, retried or not yet
// tried), and what the fan-out has not taken yet: the events past its place in the feed. A disabled
// endpoint takes nothing, so everything written since it was disabled is there, not in deliveries.
// The count reads at most PENDING_COUNT_CAP rows of each. The oldest waiting event is exact: the
// oldest pending delivery's event time, and the first event of its types past its place, in the
// feed's (commit) order, found by the feed's index (one probe per day partition unless it takes
// only some types, when the events of other types before it are read too).
const LIST = `select e.id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason, e.created_at,
       e.failing_since,
       (select count(*) from (select 1 from webhook_deliveries d
          where d.endpoint_id = e.id and d.status = 'pending' limit $1) p)::int as pending,
       (select count(*) from webhook_deliveries d where d.endpoint_id = e.id and d.status = 'dead')::int as dead,
       u.scanned, u.wanted,
       coalesce(extract(epoch from now() - least(
         (select min(d.event_at) from webhook_deliveries d where d.endpoint_id = e.id and d.status = 'pending'),
         f.created_at)), 0)::float8 as lag
     from webhook_endpoints e
     cross join lateral (select split_part(e.feed_cursor, '-', 1)::xid8 as txid,
                                split_part(e.feed_cursor, '-', 2)::bigint as seq) c
     cross join lateral (
       select count(*)::int as scanned,
              count(*) filter (where e.event_types is null or x.type = any(e.event_types))::int as wanted
       from (select ev.type from change_events ev where (ev.txid, ev.seq) > (c.txid, c.seq) limit $1) x) u
     left join lateral (
       select x.created_at from change_events x
       where (x.txid, x.seq) > (c.txid, c.seq) and (e.event_types is null or x.type = any(e.event_types))
       order by x.txid, x.seq limit 1) f on true
     where e.removed_at is null and ($2::bigint is null or e.id = $2)
     order by e.id`;

/** The endpoints that exist (not removed), or the one of them with id `only`. */
export async function listEndpoints(db: Queryable, only: number | null = null): Promise<EndpointRow[]> {
  const { rows } = await db.query(LIST, [PENDING_COUNT_CAP, only]);
  return rows.map((r) => ({
    id: Number(r.id),
    url: r.url,
    description: r.description,
    eventTypes: r.event_types,
    enabled: r.enabled,
    disabledReason: r.disabled_reason,
    createdAt: r.created_at,
    failingSince: r.failing_since,
    pending: r.pending + r.wanted,
    pendingCapped: r.pending >= PENDING_COUNT_CAP || r.scanned >= PENDING_COUNT_CAP,
    deadLetters: r.dead,
    lagSeconds: Math.max(0, Math.round(r.lag)),
  }));
}

/** What `webhooks remove` came to. */
export type Removal =
  | { removed: true; url: string; waiting: Pick<EndpointRow, 'pending' | 'pendingCapped' | 'lagSeconds'> }
  | { removed: false; removedAt: Date }
  | undefined;

/**
 * Takes an endpoint away (`webhooks remove`), in one transaction under its row lock (a fan-out or
 * a replay of it waits): marked removed and disabled, its secrets erased, what waited for it read
 * first (it will not be sent). Its deliveries stay, readable by id until the retention drops them
 * (pruneRemovedEndpoints). Undefined when there is no such endpoint; `removed: false` when it was
 * removed already.
 */
export async function removeEndpoint(pool: pg.Pool, id: number): Promise<Removal> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query<{ url: string; removed_at: Date | null }>(
      'select url, removed_at from webhook_endpoints where id = $1 for update',
      [id],
    );
    const row = rows[0];
    if (row === undefined || row.removed_at !== null) {
      await client.query('rollback');
      return row === undefined ? undefined : { removed: false, removedAt: row.removed_at! };
    }
    const [waiting] = await listEndpoints(client, id);
    await client.query(
      `update webhook_endpoints
       set removed_at = now(), enabled = false, disabled_at = coalesce(disabled_at, now()),
           disabled_reason = 'removed', secret = '', previous_secret = null, previous_secret_expires_at = null
       where id = $1`,
      [id],
    );
    await client.query('commit');
    return {
      removed: true,
      url: row.url,
      waiting: {
        pending: waiting?.pending ?? 0,
        pendingCapped: waiting?.pendingCapped ?? false,
        lagSeconds: waiting?.lagSeconds ?? 0,
      },
    };
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** Whether an endpoint is still there (not removed): checked by each attempt just before it sends. */
export async function endpointLive(db: Queryable, id: number): Promise<boolean> {
  const { rows } = await db.query<{ live: boolean }>(
    'select removed_at is null as live from webhook_endpoints where id = $1',
    [id],
  );
  return rows[0]?.live === true;
}

/** Enables or disables an endpoint; false when there is none with that id (or it was removed). */
export async function setEndpointEnabled(
  db: Queryable,
  id: number,
  enabled: boolean,
  reason: string | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update webhook_endpoints
     set enabled = $2, disabled_reason = $3, disabled_at = case when $2 then null else now() end,
         failing_since = case when $2 then null else failing_since end
     where id = $1 and removed_at is null`,
    [id, enabled, enabled ? null : reason],
  );
  return rowCount === 1;
}

/**
 * Makes `sealed` an endpoint's secret, the current one signing beside it for `graceMs` (a previous
 * one still in its grace is dropped); false when there is no such endpoint (or it was removed).
 */
export async function rotateSecretRow(
  db: Queryable,
  id: number,
  sealed: string,
  graceMs: number,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update webhook_endpoints
     set previous_secret = secret, secret = $2,
         previous_secret_expires_at = now() + $3 * interval '1 millisecond'
     where id = $1 and removed_at is null`,
    [id, sealed, graceMs],
  );
  return rowCount === 1;
}

/** An endpoint's URL and its sealed secrets that sign now: the current one, and the previous one in its grace. */
export async function endpointSecretsRow(
  db: Queryable,
  id: number,
): Promise<{ url: string; secret: string; previous: string | null } | undefined> {
  const { rows } = await db.query(
    `select url, secret, case when previous_secret_expires_at > now() then previous_secret end as previous
     from webhook_endpoints where id = $1 and removed_at is null`,
    [id],
  );
  return rows[0];
}

/** The sealed secrets of every endpoint not removed, by id, locked for re-sealing (`tokens rotate`). */
export async function lockEndpointSecrets(
  client: Queryable,
): Promise<{ id: number; secret: string | null; previous_secret: string | null }[]> {
  const { rows } = await client.query(
    // A removed endpoint's secrets are erased: nothing to re-seal.
    'select id, secret, previous_secret from webhook_endpoints where removed_at is null order by id for update',
  );
  return rows;
}

/** Writes an endpoint's re-sealed secrets. */
export async function setEndpointSecrets(
  client: Queryable,
  id: number,
  values: [string | null, string | null],
): Promise<void> {
  await client.query('update webhook_endpoints set secret = $2, previous_secret = $3 where id = $1', [
    id,
    ...values,
  ]);
}

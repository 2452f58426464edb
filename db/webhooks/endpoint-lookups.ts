import type pg from 'pg';

// Small reads and one delete on `webhook_endpoints`, for `doctor`, `webhooks deliveries` and the
// demo's own endpoint.

/** How many endpoints are enabled. */
export async function enabledEndpointCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    'select count(*)::int as n from webhook_endpoints where enabled',
  );
  return rows[0]?.n ?? 0;
}

/** Whether the endpoint exists, removed or not, and when it was removed (null while it is not). */
export async function endpointRemoval(
  pool: pg.Pool,
  id: number,
): Promise<{ removedAt: Date | null } | undefined> {
  const { rows } = await pool.query<{ removed_at: Date | null }>(
    'select removed_at from webhook_endpoints where id = $1',
    [id],
  );
  return rows[0] === undefined ? undefined : { removedAt: rows[0].removed_at };
}

/** Deletes the endpoint outright, its deliveries with it (on cascade). */
export async function deleteEndpoint(pool: pg.Pool, id: number): Promise<void> {
  await pool.query('delete from webhook_endpoints where id = $1', [id]);
}

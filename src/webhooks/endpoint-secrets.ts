import type pg from 'pg';
import { withTransaction } from '../../db/transaction.js';
import {
  endpointSecretsRow,
  insertEndpointRow,
  lockEndpointSecrets,
  rotateSecretRow,
  setEndpointSecret,
  setEndpointSecrets,
} from '../../db/webhooks/index.js';
import type { KeyRing } from '../tokens/index.js';
import { newWebhookSecret } from './signing.js';

// Webhook endpoints' secrets: made when an endpoint is added, rotated, opened for the signer and
// resealed under a new key (the statements are db/webhooks/endpoints.ts's). Secrets are sealed
// under the card-token key ring, bound to their endpoint; the plain secret leaves only through
// `webhooks add` / `rotate-secret` (printed once) and the signer.

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.ClientBase, 'query'>;

/** How long a rotated-out secret keeps signing beside the new one (docs/commands.md). */
const ROTATION_GRACE_MS = 24 * 3_600_000;

const context = (endpointId: number) => `webhook_secret ${endpointId}`;

/** Adds an endpoint that takes events after `feedCursor`; returns its id and its secret (shown once). */
export async function insertEndpoint(
  pool: pg.Pool,
  ring: KeyRing,
  o: { url: string; description: string; eventTypes: string[] | null; feedCursor: string },
): Promise<{ id: number; secret: string }> {
  return withTransaction(pool, async (client) => {
    // The sealed secret names its endpoint: the id comes first, the secret right after.
    const id = await insertEndpointRow(client, o);
    const secret = newWebhookSecret();
    await setEndpointSecret(client, id, ring.sealSecret(context(id), secret));
    return { id, secret };
  });
}

/**
 * A new secret for an endpoint; the current one keeps signing beside it for 24 h (a previous one
 * still in its grace is dropped). Undefined when there is no such endpoint.
 */
export async function rotateEndpointSecret(
  db: Queryable,
  ring: KeyRing,
  id: number,
): Promise<string | undefined> {
  const secret = newWebhookSecret();
  const rotated = await rotateSecretRow(db, id, ring.sealSecret(context(id), secret), ROTATION_GRACE_MS);
  return rotated ? secret : undefined;
}

/** What the signer needs of an endpoint: its URL and the secrets that sign now (current first). */
export interface EndpointTarget {
  id: number;
  url: string;
  secrets: string[];
}

export async function endpointTarget(
  db: Queryable,
  ring: KeyRing,
  id: number,
): Promise<EndpointTarget | undefined> {
  const r = await endpointSecretsRow(db, id);
  if (r === undefined) return undefined;
  const secrets = [ring.openSecret(context(id), r.secret)];
  if (r.previous !== null) secrets.push(ring.openSecret(context(id), r.previous));
  return { id, url: r.url, secrets };
}

/**
 * Re-seals every endpoint's secrets under the ring's first key (`tokens rotate`). A secret the
 * ring cannot open is left as it is and named (by endpoint, never by value).
 */
export async function resealEndpointSecrets(
  pool: pg.Pool,
  ring: KeyRing,
): Promise<{ resealed: number; unreadable: string[] }> {
  return withTransaction(pool, async (client) => {
    const unreadable: string[] = [];
    let resealed = 0;
    const rows = await lockEndpointSecrets(client);
    const current = (v: string | null) => v === null || v.startsWith(`ct1:${ring.primaryId}:`);
    for (const r of rows) {
      const id = Number(r.id);
      if (current(r.secret) && current(r.previous_secret)) continue;
      const reseal = (v: string | null) =>
        v === null ? null : ring.sealSecret(context(id), ring.openSecret(context(id), v));
      let values: [string | null, string | null];
      try {
        values = [reseal(r.secret), reseal(r.previous_secret)];
      } catch (error) {
        unreadable.push(`webhook endpoint ${id}: ${(error as Error).message}`);
        continue;
      }
      await setEndpointSecrets(client, id, values);
      resealed++;
    }
    return { resealed, unreadable };
  });
}

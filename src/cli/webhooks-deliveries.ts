import { endpointRemoval } from '../../db/webhooks/index.js';
import type { Config } from '../config/index.js';
import { CliError, formatTime } from '../shared/index.js';
import { feedCursorAt, listDeliveries, replayEndpoint, type Since } from '../webhooks/index.js';
import { auditCli } from './audit.js';
import type { Io } from './common.js';
import { withDb } from './webhooks.js';

// `cards-sync webhooks deliveries ID [--failed] [--json]` and `webhooks replay ID --since …`.

const missing = (id: number) =>
  new CliError(`no webhook endpoint ${id}; \`cards-sync webhooks list\` shows them`, 2);

export async function cmdWebhooksDeliveries(
  config: Config,
  io: Io,
  o: { id: number; failed: boolean; json: boolean; limit: number },
): Promise<number> {
  // A removed endpoint's deliveries stay readable until the retention drops them.
  const { rows, removedAt } = await withDb(config, async (handle) => {
    const endpoint = await endpointRemoval(handle.pool, o.id);
    if (endpoint === undefined) throw missing(o.id);
    return {
      removedAt: endpoint.removedAt,
      rows: await listDeliveries(handle.pool, { endpointId: o.id, failed: o.failed, limit: o.limit }),
    };
  });
  if (o.json) {
    io.out(JSON.stringify(rows));
    return 0;
  }
  if (removedAt !== null)
    io.out(`endpoint ${o.id} was removed at ${formatTime(removedAt)}; what it was sent:`);
  if (rows.length === 0) {
    io.out(o.failed ? `no failed deliveries to endpoint ${o.id}` : `no deliveries to endpoint ${o.id} yet`);
    return 0;
  }
  for (const d of rows) {
    const last = d.last;
    const answer =
      last === null
        ? 'not tried yet'
        : `${last.statusCode ?? last.errorCode} in ${last.latencyMs} ms at ${formatTime(last.at)}${last.excerpt === '' ? '' : `: ${last.excerpt.slice(0, 120)}`}`;
    const next = d.nextAttemptAt !== null && d.attempts > 0 ? `, next ${formatTime(d.nextAttemptAt)}` : '';
    io.out(
      `${d.id}  ${d.eventId}  ${d.type}  subscriber ${d.subscriberId}  ${d.status}${d.replay ? ' (replay)' : ''}  ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}${next}  ${answer}`,
    );
  }
  return 0;
}

export async function cmdWebhooksReplay(
  config: Config,
  io: Io,
  o: { id: number; since: Since },
): Promise<number> {
  const outcome = await withDb(config, async (handle) => {
    const cursor = 'cursor' in o.since ? o.since.cursor : await feedCursorAt(handle.pool, o.since.time);
    const done = await replayEndpoint(handle.pool, o.id, cursor);
    if (done === undefined) throw missing(o.id);
    await auditCli(
      config,
      io,
      'webhooks_replay',
      { endpoint: o.id, from: done.from, to: done.to, replayed: done.replayed },
      handle.db,
    );
    return done;
  });
  const n = outcome.replayed;
  const ids =
    outcome.firstEventId === null
      ? ''
      : n === 1
        ? ` (${outcome.firstEventId})`
        : ` (${outcome.firstEventId} … ${outcome.lastEventId})`;
  io.out(
    `endpoint ${o.id}: ${n} event${n === 1 ? '' : 's'} queued again from ${outcome.from}${ids}; each is sent with the event's own id as its webhook-id, the same as before, so a receiver that deduplicates on it drops the ones it already has (docs/webhooks.md#replays-and-deduplication)`,
  );
  return 0;
}

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Webhook } from 'standardwebhooks';

// The webhook receiver of bench/changes.ts: every delivery verified; the latency of each event's first receipt.

export interface Receiver {
  server: Server;
  /** Its address on loopback; an endpoint's path after it names the endpoint. */
  url: string;
  /** Each endpoint's signing secret, by path. */
  secrets: Map<string, Webhook>;
  /** Each event's first receipt, by `path id`: when, and how long after the event's `created_at`. */
  firstSeen: Map<string, { at: number; latencyMs: number }>;
  /** Deliveries received and verified, and those that failed verification. */
  counts: { received: number; failures: number };
}

/** Starts the receiver on a free loopback port; resolves once it listens. */
export async function startReceiver(): Promise<Receiver> {
  const secrets = new Map<string, Webhook>();
  const firstSeen = new Map<string, { at: number; latencyMs: number }>();
  const counts = { received: 0, failures: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        const event = secrets.get(req.url ?? '')!.verify(body, req.headers as Record<string, string>) as {
          id: string;
          timestamp: string;
        };
        counts.received += 1;
        const key = `${req.url} ${event.id}`;
        if (!firstSeen.has(key)) firstSeen.set(key, { at, latencyMs: at - Date.parse(event.timestamp) });
        res.end();
      } catch {
        counts.failures += 1;
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url, secrets, firstSeen, counts };
}

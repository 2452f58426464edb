import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SavedCard } from '../api/index.js';
import { type ChangeClass, type WakeUp, walletChanges } from './changes.js';
import { type CreatedDates, datedFromChanges } from './created-dates.js';
import { cardsAtVersion, type MockDataOptions, subscriberIdForEmail } from './data.js';
import type { MockFaults } from './faults.js';
import { type WalletRules, wallets } from './wallets.js';

/** A parsed lookup, handed to an override. */
export type MockLookup = { kind: 'id'; subscriberId: number } | { kind: 'email'; email: string };

/** What an override answers instead of the data set. */
export interface MockReply {
  status: number;
  /** A value is sent as JSON; a string or Buffer as is. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long before answering, ms. */
  delayMs?: number;
  /** Destroy the socket instead of answering (connection reset). */
  reset?: boolean;
}

/** Options of {@link createMockApi}. */
export interface MockApiOptions extends MockDataOptions {
  /** Accepted key; `undefined` accepts any `Apikey <key>` header. */
  apiKey?: string;
  /** Delay before every answer, ms. Default 0. */
  latencyMs?: number;
  /** Share of requests answered 503, 0 to 1. Default 0. */
  failRate?: number;
  /** Ids divisible by this answer 404. Default 0 (never). */
  notFoundEvery?: number;
  /** Shares of requests, 0 to 1, that meet each fault (for the fault suite). Default none. */
  faults?: MockFaults;
  /** Wallets change over wall time at these classes' rates (src/mock-api/changes.ts). Default none. */
  changes?: {
    classes: readonly ChangeClass[];
    seed?: number;
    startMs?: number;
    clock?: () => number;
    /** The cards' createDates: `random` (default, the control), `from-changes` or `predating` (src/mock-api/created-dates.ts). */
    createdDates?: CreatedDates;
    /** Quiet wallets that start changing later (`--wake-up`). */
    wakeUp?: WakeUp;
    /**
     * Changes of stated kinds in wallets of a stated size (`--change-kinds`, `--wallet-cards`;
     * src/mock-api/wallets.ts). Default none: every change renews every token and draws the count afresh.
     */
    wallets?: WalletRules;
  };
  /** Keep every request in `requests` (tests count calls). Default true; a long run turns it off. */
  recordRequests?: boolean;
  /** Lets a test answer a lookup its own way; `undefined` falls through to the data set. */
  override?: (
    lookup: MockLookup,
    req: IncomingMessage,
  ) => MockReply | undefined | Promise<MockReply | undefined>;
}

export interface MockApi {
  server: Server;
  /** `http://127.0.0.1:<port>` once started. */
  url: string;
  /** Requests received, by path (for tests that count calls). */
  requests: { method: string; path: string; headers: IncomingMessage['headers']; at: number }[];
  /** Lookups answered from the data set (counted whether or not `requests` records them). */
  served: number;
  /** What the sandbox holds for a subscriber right now: the truth a copy is compared with. */
  truth(subscriberId: number): SavedCard[];
  /** How many times the subscriber's wallet has changed so far (0 without `changes`). */
  version(subscriberId: number): number;
  /** The subscriber's true change rate, per second (0 without `changes`). */
  changeRate(subscriberId: number): number;
  /** When a quiet wallet woke (`--wake-up`), ms since the epoch; null for every other wallet. */
  wokenAt(subscriberId: number): number | null;
  start(port?: number, host?: string): Promise<string>;
  stop(): Promise<void>;
}

const ROUTE = /^\/api\/saved-cards(?:\/subscriber)?\/(?:(email)\/([^/]+)|([^/]+))\/?$/;

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const isRaw = typeof body === 'string' || Buffer.isBuffer(body);
  const payload = body === undefined ? '' : isRaw ? body : JSON.stringify(body);
  res.writeHead(status, {
    ...(isRaw || body === undefined ? {} : { 'content-type': 'application/json' }),
    ...headers,
  });
  res.end(payload);
}

function problem(res: ServerResponse, status: number, title: string, detail: string): void {
  send(res, status, JSON.stringify({ title, status, detail }), {
    'content-type': 'application/problem+json',
  });
}

/** Answers with one of the faults, drawn by their shares, or normally. */
async function injectFault(res: ServerResponse, faults: MockFaults, cards: unknown): Promise<void> {
  let draw = Math.random();
  const pick = (share = 0) => {
    draw -= share;
    return draw < 0;
  };
  if (pick(faults.rateLimited)) {
    return send(res, 429, JSON.stringify({ title: 'Too Many Requests', status: 429 }), {
      'retry-after': '1',
    });
  }
  if (pick(faults.slow)) await sleep(faults.slowMs ?? 5000);
  else if (pick(faults.truncated)) {
    const body = JSON.stringify(cards);
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
    });
    res.write(body.slice(0, Math.floor(body.length / 2)));
    await sleep(20);
    res.socket?.destroy();
    return;
  } else if (pick(faults.trickle)) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('[');
    const timer = setInterval(() => res.write(' '), 500);
    res.on('close', () => clearInterval(timer));
    return;
  }
  send(res, 200, cards);
}

/** The sandbox of the Saved Cards API: deterministic cards for any id or e-mail. */
export function createMockApi(options: MockApiOptions = {}): MockApi {
  const requests: MockApi['requests'] = [];
  const clock = options.changes?.clock ?? Date.now;
  const startMs = options.changes?.startMs ?? clock();
  const seed = options.changes?.seed ?? 0;
  const changes = options.changes
    ? walletChanges(options.changes.classes, startMs, seed, options.changes.wakeUp)
    : undefined;
  const version = (subscriberId: number) => changes?.versionAt(subscriberId, clock()) ?? 0;
  const createdDates = options.changes?.createdDates ?? 'random';
  const kinds =
    changes && options.changes?.wallets
      ? wallets(options.changes.wallets, changes, createdDates, startMs, seed)
      : undefined;
  const truth = (subscriberId: number) => {
    const v = version(subscriberId);
    if (kinds) return kinds.cardsAt(subscriberId, v);
    const cards = cardsAtVersion(subscriberId, v, options);
    return changes && createdDates !== 'random'
      ? datedFromChanges(cards, changes, subscriberId, v, startMs, seed, options, createdDates)
      : cards;
  };
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    if (options.recordRequests !== false) {
      requests.push({ method: req.method ?? '', path, headers: req.headers, at: Date.now() });
    }
    if (path === '/healthz') return send(res, 200, { ok: true });
    const match = ROUTE.exec(path);
    if (!match) return problem(res, 404, 'Not Found', 'no such route');
    if (req.method !== 'GET') return problem(res, 405, 'Method Not Allowed', 'use GET');
    const auth = req.headers.authorization ?? '';
    const key = /^Apikey (\S+)$/.exec(auth)?.[1];
    if (key === undefined || (options.apiKey !== undefined && key !== options.apiKey)) {
      return problem(res, 401, 'Unauthorized', 'missing or unknown API key');
    }
    let lookup: MockLookup;
    if (match[1] === 'email') {
      let email: string;
      try {
        email = decodeURIComponent(match[2]!);
      } catch {
        return problem(res, 400, 'Bad Request', 'the e-mail is not correctly percent-encoded');
      }
      lookup = { kind: 'email', email };
    } else {
      const id = Number(match[3]);
      if (!/^\d+$/.test(match[3]!) || !Number.isSafeInteger(id)) {
        return problem(res, 400, 'Bad Request', 'the subscriber id must be an integer');
      }
      lookup = { kind: 'id', subscriberId: id };
    }
    const reply = await options.override?.(lookup, req);
    if (reply !== undefined) {
      if (reply.delayMs) await sleep(reply.delayMs);
      if (reply.reset) {
        req.socket.destroy();
        return;
      }
      return send(res, reply.status, reply.body, reply.headers);
    }
    if (options.latencyMs) await sleep(options.latencyMs);
    if (options.failRate && Math.random() < options.failRate) {
      return problem(res, 503, 'Service Unavailable', 'injected failure');
    }
    const subscriberId = lookup.kind === 'id' ? lookup.subscriberId : subscriberIdForEmail(lookup.email);
    if (options.notFoundEvery && subscriberId % options.notFoundEvery === 0) {
      return problem(res, 404, 'Not Found', 'unknown subscriber');
    }
    const cards = truth(subscriberId);
    api.served += 1;
    if (options.faults) return injectFault(res, options.faults, cards);
    send(res, 200, cards);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) problem(res, 500, 'Internal Server Error', 'mock failure');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;

  const api: MockApi = {
    server,
    url: '',
    requests,
    served: 0,
    truth,
    version,
    changeRate: (subscriberId) => changes?.rateOf(subscriberId) ?? 0,
    wokenAt: (subscriberId) => changes?.wokenAt(subscriberId) ?? null,
    async start(port = 0, host = '127.0.0.1') {
      server.listen(port, host);
      await once(server, 'listening');
      const address = server.address() as AddressInfo;
      api.url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
      return api.url;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return api;
}

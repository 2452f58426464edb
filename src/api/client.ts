import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { Agent, type Dispatcher } from 'undici';
import type { ApiConfig } from '../config/index.js';
import { redactExcerpt } from '../shared/index.js';
import { tracing } from '../tracing/index.js';
import type { FetchOutcome, Target } from './lookup.js';
import { classifyNetworkError } from './network-error.js';
import { InvalidResponse, parseCards } from './schema.js';

/** The largest body accepted from the API (docs/architecture.md). */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Options of {@link createApiClient} beyond the API config. */
export interface ApiClientOptions {
  /** Most sockets kept open to the API. Default 64. */
  connections?: number;
  /** Idle time before a kept-alive socket is closed, ms. Default 30000. */
  keepAliveTimeoutMs?: number;
  /** Largest accepted body in bytes. Default {@link MAX_BODY_BYTES}. */
  maxBodyBytes?: number;
}

export interface ApiClient {
  /** Fetches and validates one subscriber's cards. Never throws for an API or network problem. */
  fetchCards(target: Target, options?: { signal?: AbortSignal }): Promise<FetchOutcome>;
  /** The request path for a target (for logs: it holds no secret). */
  pathFor(target: Target): string;
  /** The key's fingerprint (apiKeyFingerprint below): which key this client sends, never the key. */
  keyFingerprint: string;
  close(): Promise<void>;
}

/** What every request of one client shares, made once by {@link createApiClient}. */
interface Requester {
  readonly agent: Agent;
  readonly origin: string;
  /** What goes before every request's path: the base URL's own path and the API's. */
  readonly prefix: string;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  /** What an excerpt of an error body must never show. */
  readonly secrets: readonly string[];
}

type Body = Dispatcher.ResponseData['body'];

export function createApiClient(config: ApiConfig, options: ApiClientOptions = {}): ApiClient {
  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  // The base URL may carry a path (a gateway's mount point): the origin goes to the agent, the
  // path goes before every request's.
  const baseUrl = new URL(config.baseUrl);
  const r: Requester = {
    origin: baseUrl.origin,
    prefix:
      baseUrl.pathname.replace(/\/+$/, '') +
      (config.pathStyle === 'sandbox' ? '/api/saved-cards' : '/api/saved-cards/subscriber'),
    agent: new Agent({
      connections: options.connections ?? 64,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
      // The whole-request deadline below is the real limit; these only stop a socket that outlives it.
      headersTimeout: config.timeoutMs + 1000,
      bodyTimeout: config.timeoutMs + 1000,
      // HTTP/1.1, one request per socket, as `connections` counts them: undici 8 would otherwise
      // speak HTTP/2 to an HTTPS API that offers it, all requests on one connection.
      allowH2: false,
    }),
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      'cache-control': 'no-cache',
      authorization: `Apikey ${config.apiKey}`,
    },
    timeoutMs: config.timeoutMs,
    maxBodyBytes,
    secrets: [config.apiKey],
  };
  return {
    fetchCards: (target, opts) => fetchCards(r, target, opts),
    pathFor: (target) => pathFor(r.prefix, target),
    keyFingerprint: apiKeyFingerprint(config.apiKey),
    close: () => r.agent.close(),
  };
}

function pathFor(prefix: string, target: Target): string {
  return 'subscriberId' in target
    ? `${prefix}/${target.subscriberId}`
    : `${prefix}/email/${encodeURIComponent(target.email)}`;
}

/** Milliseconds since `started` (a `performance.now()`), whole. */
function since(started: number): number {
  return Math.round(performance.now() - started);
}

/** One request under its deadline and the caller's cancellation, its body read and its answer classified. */
async function fetchCards(
  r: Requester,
  target: Target,
  opts: { signal?: AbortSignal } = {},
): Promise<FetchOutcome> {
  const started = performance.now();
  // One controller for the deadline and the caller's cancellation, torn down in `finally`:
  // AbortSignal.timeout and AbortSignal.any cost more per request than the request's own parsing.
  const controller = new AbortController();
  const deadline = { aborted: false };
  const timer = setTimeout(() => {
    deadline.aborted = true;
    controller.abort();
  }, r.timeoutMs);
  const cancel = () => controller.abort();
  if (opts.signal?.aborted) cancel();
  else opts.signal?.addEventListener('abort', cancel, { once: true });
  let status = 0;
  try {
    const response = await r.agent.request({
      origin: r.origin,
      path: pathFor(r.prefix, target),
      method: 'GET',
      headers: r.headers,
      signal: controller.signal,
    });
    status = response.statusCode;
    // A destroyed body may still emit an error: without a listener it would crash the process.
    response.body.on('error', () => {});
    const declared = Number(response.headers['content-length']);
    const ok = status >= 200 && status <= 299;
    // Only a success body is worth refusing by size; an error is decided by its status alone.
    if (ok && Number.isFinite(declared) && declared > r.maxBodyBytes) {
      response.body.destroy();
      return invalid(
        status,
        `the body is over ${r.maxBodyBytes} bytes (Content-Length ${declared})`,
        started,
      );
    }
    // A declared length within the limit bounds the body (undici refuses a body that outruns
    // it): read it whole. Any other body is counted as it comes.
    const bytes =
      Number.isFinite(declared) && declared <= r.maxBodyBytes
        ? Buffer.from(await response.body.arrayBuffer())
        : await readCounted(response.body, ok, r.maxBodyBytes);
    if (bytes === undefined) return invalid(status, `the body is over ${r.maxBodyBytes} bytes`, started);
    return ok
      ? success(bytes, status, target, started)
      : failure(r, bytes, status, response.headers, started);
  } catch (error) {
    return classifyNetworkError(error, {
      status,
      deadline,
      cancelled: opts.signal?.aborted === true,
      timeoutMs: r.timeoutMs,
      elapsed: since(started),
    });
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', cancel);
  }
}

/**
 * A body without a declared length within the limit, counted as it comes. Over the limit, a
 * success body is refused (undefined) and an error body is cut there.
 */
async function readCounted(body: Body, ok: boolean, maxBodyBytes: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > maxBodyBytes) {
      body.destroy();
      if (!ok) break;
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The body as text. */
function textOf(bytes: Buffer): string {
  // A byte-order mark is not part of the JSON (undici's text() dropped it, for a body with a
  // Content-Length only): dropped whatever the framing.
  const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  return (bom ? bytes.subarray(3) : bytes).toString('utf8');
}

function invalid(status: number, message: string, started: number): FetchOutcome {
  return { kind: 'invalid_response', status, message, durationMs: since(started) };
}

/** A 2xx answer: its cards, or why they cannot be trusted. */
function success(bytes: Buffer, status: number, target: Target, started: number): FetchOutcome {
  // An answer is read as it was sent or not at all: bytes that are not UTF-8 would be replaced
  // by U+FFFD without a word, changing what is stored.
  if (!isUtf8(bytes)) return invalid(status, 'the body is not valid UTF-8', started);
  const text = textOf(bytes);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return invalid(status, 'the body is not valid JSON', started);
  }
  try {
    const cards = parseCards(body, 'subscriberId' in target ? { subscriberId: target.subscriberId } : {});
    // On the attempt's span (`api.fetch_cards`): a span of its own for the validation cost a kept
    // sync more than the validation does (docs/tracing.md, "What it costs").
    tracing().annotate({ 'cards_sync.cards': cards.length });
    return { kind: 'ok', status, cards, durationMs: since(started) };
  } catch (error) {
    if (error instanceof InvalidResponse) return invalid(status, error.message, started);
    throw error;
  }
}

/** Any other answer, by its status: the body only gives an error's message an excerpt. */
function failure(
  r: Requester,
  bytes: Buffer,
  status: number,
  headers: Dispatcher.ResponseData['headers'],
  started: number,
): FetchOutcome {
  const text = textOf(bytes);
  if (status === 404) return { kind: 'not_found', status, durationMs: since(started) };
  if (status === 401 || status === 403) {
    return {
      kind: 'auth_rejected',
      status,
      message: `HTTP ${status}${excerpt(text, r.secrets)}`,
      durationMs: since(started),
    };
  }
  if (status === 429) {
    return {
      kind: 'rate_limited',
      status,
      retryAfterMs: parseRetryAfter(headers['retry-after']),
      durationMs: since(started),
    };
  }
  if (status >= 500) {
    return {
      kind: 'transient',
      code: 'http_5xx',
      status,
      message: `HTTP ${status}${excerpt(text, r.secrets)}`,
      durationMs: since(started),
    };
  }
  return {
    kind: 'rejected',
    code: `http_${status}`,
    status,
    message: `HTTP ${status}${excerpt(text, r.secrets)}`,
    durationMs: since(started),
  };
}

function excerpt(text: string, secrets: readonly string[]): string {
  const e = redactExcerpt(text, secrets);
  return e === '' ? '' : `: ${e}`;
}

// Which API key a process holds, told without the key: a fleet paused by a rejected key must be able
// to name the process that holds it, and to tell it from the key the rest of the fleet uses.

/**
 * A short fingerprint of an API key: the first 12 hex digits (48 bits) of a SHA-256 over a fixed
 * label and the key. It tells keys apart and cannot give the key back: a key is a UUID (122 random
 * bits), of which 48 bits of a one-way hash leave some 2^74 candidates each. The label keeps it from
 * matching a plain SHA-256 of the key that some other system may publish.
 */
export function apiKeyFingerprint(apiKey: string): string {
  return createHash('sha256')
    .update('cards-sync api key fingerprint\u0000')
    .update(apiKey)
    .digest('hex')
    .slice(0, 12);
}

// `Retry-After`, as a 429 of the API and a webhook receiver send it.

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; 1 s when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === '') return 1000;
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text), 86_400) * 1000;
  // Only an IMF-fixdate (`Wed, 21 Oct 2015 07:28:00 GMT`) or its obsolete cousins: Date.parse reads
  // junk such as "-1" or "retry 2030" as dates.
  const imf = /^[A-Za-z]{3,9},? +\d{1,2}[ -][A-Za-z]{3}[ -]\d{2,4} \d{2}:\d{2}:\d{2} GMT$/;
  const asctime = /^[A-Za-z]{3} [A-Za-z]{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}$/;
  if (!imf.test(text) && !asctime.test(text)) return 1000;
  const date = Date.parse(asctime.test(text) ? `${text} GMT` : text);
  if (Number.isNaN(date)) return 1000;
  return Math.min(Math.max(date - now, 0), 86_400_000);
}

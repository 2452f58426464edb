import { isUtf8 } from 'node:buffer';
import { Agent, errors } from 'undici';
import type { ApiConfig } from '../config/index.js';
import { redactExcerpt } from '../redact.js';
import { tracing } from '../tracing/index.js';
import { apiKeyFingerprint } from './key-fingerprint.js';
import { InvalidResponse, parseCards, type SavedCard } from './schema.js';

/** The largest body accepted from the API (DESIGN §5). */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Whom to look up: a subscriber id or an e-mail address. */
export type Target = { subscriberId: number } | { email: string };

/**
 * Every answer of the API as one typed outcome, one variant per row of DESIGN §5. The client
 * never retries: the queue owns retries.
 */
export type FetchOutcome =
  | { kind: 'ok'; status: number; cards: SavedCard[]; durationMs: number }
  | { kind: 'not_found'; status: 404; durationMs: number }
  | { kind: 'auth_rejected'; status: 401 | 403; message: string; durationMs: number }
  | { kind: 'rate_limited'; status: 429; retryAfterMs: number; durationMs: number }
  | { kind: 'transient'; code: TransientCode; status?: number; message: string; durationMs: number }
  | { kind: 'rejected'; code: string; status: number; message: string; durationMs: number }
  | { kind: 'invalid_response'; status: number; message: string; durationMs: number };

export type TransientCode = 'http_5xx' | 'timeout' | 'connection' | 'aborted';

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
  /** The key's fingerprint (src/fleet/api-key.ts): which key this client sends, never the key. */
  keyFingerprint: string;
  close(): Promise<void>;
}

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

export function createApiClient(config: ApiConfig, options: ApiClientOptions = {}): ApiClient {
  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  // The base URL may carry a path (a gateway's mount point): the origin goes to the agent, the
  // path goes before every request's.
  const baseUrl = new URL(config.baseUrl);
  const origin = baseUrl.origin;
  const prefix =
    baseUrl.pathname.replace(/\/+$/, '') +
    (config.pathStyle === 'sandbox' ? '/api/saved-cards' : '/api/saved-cards/subscriber');
  const agent = new Agent({
    connections: options.connections ?? 64,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
    // The whole-request deadline below is the real limit; these only stop a socket that outlives it.
    headersTimeout: config.timeoutMs + 1000,
    bodyTimeout: config.timeoutMs + 1000,
  });
  const headers = {
    accept: 'application/json',
    'content-type': 'application/json',
    'cache-control': 'no-cache',
    authorization: `Apikey ${config.apiKey}`,
  };

  function pathFor(target: Target): string {
    return 'subscriberId' in target
      ? `${prefix}/${target.subscriberId}`
      : `${prefix}/email/${encodeURIComponent(target.email)}`;
  }

  async function fetchCards(target: Target, opts: { signal?: AbortSignal } = {}): Promise<FetchOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    // One controller for the deadline and the caller's cancellation, torn down in `finally`:
    // AbortSignal.timeout and AbortSignal.any cost more per request than the request's own parsing.
    const controller = new AbortController();
    const deadline = { aborted: false };
    const timer = setTimeout(() => {
      deadline.aborted = true;
      controller.abort();
    }, config.timeoutMs);
    const cancel = () => controller.abort();
    if (opts.signal?.aborted) cancel();
    else opts.signal?.addEventListener('abort', cancel, { once: true });
    const secrets = [config.apiKey];
    let status = 0;
    try {
      const response = await agent.request({
        origin,
        path: pathFor(target),
        method: 'GET',
        headers,
        signal: controller.signal,
      });
      status = response.statusCode;
      // A destroyed body may still emit an error: without a listener it would crash the process.
      response.body.on('error', () => {});
      const declared = Number(response.headers['content-length']);
      // Only a success body is worth refusing by size; an error is decided by its status alone.
      if (status >= 200 && status <= 299 && Number.isFinite(declared) && declared > maxBodyBytes) {
        response.body.destroy();
        return {
          kind: 'invalid_response',
          status,
          message: `the body is over ${maxBodyBytes} bytes (Content-Length ${declared})`,
          durationMs: elapsed(),
        };
      }
      // A declared length within the limit bounds the body (undici refuses a body that outruns
      // it): read it whole. Any other body is counted as it comes.
      let bytes: Buffer;
      if (Number.isFinite(declared) && declared <= maxBodyBytes) {
        bytes = Buffer.from(await response.body.arrayBuffer());
      } else {
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of response.body) {
          size += (chunk as Buffer).length;
          if (size > maxBodyBytes) {
            response.body.destroy();
            if (status < 200 || status > 299) break;
            return {
              kind: 'invalid_response',
              status,
              message: `the body is over ${maxBodyBytes} bytes`,
              durationMs: elapsed(),
            };
          }
          chunks.push(chunk as Buffer);
        }
        bytes = Buffer.concat(chunks);
      }
      const ok = status >= 200 && status <= 299;
      // An answer is read as it was sent or not at all: bytes that are not UTF-8 would be replaced
      // by U+FFFD without a word, changing what is stored.
      if (ok && !isUtf8(bytes)) {
        return {
          kind: 'invalid_response',
          status,
          message: 'the body is not valid UTF-8',
          durationMs: elapsed(),
        };
      }
      // A byte-order mark is not part of the JSON (undici's text() dropped it, for a body with a
      // Content-Length only): dropped whatever the framing.
      const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
      const text = (bom ? bytes.subarray(3) : bytes).toString('utf8');
      const excerpt = () => {
        const e = redactExcerpt(text, secrets);
        return e === '' ? '' : `: ${e}`;
      };
      if (ok) {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          return {
            kind: 'invalid_response',
            status,
            message: 'the body is not valid JSON',
            durationMs: elapsed(),
          };
        }
        const validating = performance.timeOrigin + performance.now();
        let valid = false;
        let count = 0;
        try {
          const cards = parseCards(
            body,
            'subscriberId' in target ? { subscriberId: target.subscriberId } : {},
          );
          valid = true;
          count = cards.length;
          return { kind: 'ok', status, cards, durationMs: elapsed() };
        } catch (error) {
          if (error instanceof InvalidResponse) {
            return { kind: 'invalid_response', status, message: error.message, durationMs: elapsed() };
          }
          throw error;
        } finally {
          tracing().record('api.validate', validating, performance.timeOrigin + performance.now(), {
            'cards_sync.valid': valid,
            'cards_sync.cards': count,
          });
        }
      }
      if (status === 404) return { kind: 'not_found', status, durationMs: elapsed() };
      if (status === 401 || status === 403) {
        return {
          kind: 'auth_rejected',
          status,
          message: `HTTP ${status}${excerpt()}`,
          durationMs: elapsed(),
        };
      }
      if (status === 429) {
        return {
          kind: 'rate_limited',
          status,
          retryAfterMs: parseRetryAfter(response.headers['retry-after']),
          durationMs: elapsed(),
        };
      }
      if (status >= 500) {
        return {
          kind: 'transient',
          code: 'http_5xx',
          status,
          message: `HTTP ${status}${excerpt()}`,
          durationMs: elapsed(),
        };
      }
      return {
        kind: 'rejected',
        code: `http_${status}`,
        status,
        message: `HTTP ${status}${excerpt()}`,
        durationMs: elapsed(),
      };
    } catch (error) {
      return classifyNetworkError(error, {
        status,
        deadline,
        cancelled: opts.signal?.aborted === true,
        timeoutMs: config.timeoutMs,
        elapsed: elapsed(),
      });
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', cancel);
    }
  }

  return {
    fetchCards,
    pathFor,
    keyFingerprint: apiKeyFingerprint(config.apiKey),
    close: () => agent.close(),
  };
}

function classifyNetworkError(
  error: unknown,
  ctx: {
    status: number;
    deadline: { aborted: boolean };
    cancelled: boolean;
    timeoutMs: number;
    elapsed: number;
  },
): FetchOutcome {
  const base = { durationMs: ctx.elapsed, ...(ctx.status ? { status: ctx.status } : {}) };
  if (ctx.deadline.aborted) {
    return {
      kind: 'transient',
      code: 'timeout',
      message: `no complete answer within ${ctx.timeoutMs} ms`,
      ...base,
    };
  }
  if (
    ctx.cancelled ||
    error instanceof errors.RequestAbortedError ||
    (error as Error)?.name === 'AbortError'
  ) {
    return { kind: 'transient', code: 'aborted', message: 'the request was cancelled', ...base };
  }
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
    return { kind: 'transient', code: 'timeout', message: 'the API stopped answering mid-request', ...base };
  }
  const code =
    (error as NodeJS.ErrnoException)?.code ?? (error as { cause?: NodeJS.ErrnoException })?.cause?.code;
  // Only the error code travels on: a message could quote a URL, and the e-mail is in the URL.
  return {
    kind: 'transient',
    code: 'connection',
    message: `connection failed (${code ?? 'unknown error'})`,
    ...base,
  };
}

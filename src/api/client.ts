import { isUtf8 } from 'node:buffer';
import { Agent } from 'undici';
import type { ApiConfig } from '../config/index.js';
import { redactExcerpt } from '../redact.js';
import { tracing } from '../tracing/index.js';
import { apiKeyFingerprint } from './key-fingerprint.js';
import type { FetchOutcome, Target } from './lookup.js';
import { classifyNetworkError } from './network-error.js';
import { parseRetryAfter } from './retry-after.js';
import { InvalidResponse, parseCards } from './schema.js';

/** The largest body accepted from the API (DESIGN §5). */
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
  /** The key's fingerprint (src/fleet/api-key.ts): which key this client sends, never the key. */
  keyFingerprint: string;
  close(): Promise<void>;
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

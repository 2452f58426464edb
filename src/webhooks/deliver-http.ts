import { isIP } from 'node:net';
import { Agent } from 'undici';
import type { AttemptResult } from '../../db/webhooks/index.js';
import { parseRetryAfter } from '../api/index.js';
import { redactExcerpt } from '../shared/index.js';
import type { SignedHeaders } from './signing.js';
import { guardedLookupWith, isPublicAddress, type Resolve, WebhookAddressError } from './ssrf.js';

// One webhook POST (docs/webhooks.md): a 2xx is delivered; anything else, a redirect included (it is never
// followed), a timeout or a refused connection is a failure the caller retries. What the receiver
// answered is read up to a cap and kept as a short redacted excerpt.

/** Bytes of an answer read at most; the rest is dropped with the connection. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** Characters of an answer kept in the attempts table. */
export const EXCERPT_CHARS = 1024;

export interface SenderOptions {
  /** `WEBHOOK_TIMEOUT_MS`: the whole deadline of one POST (connect, headers, body). Default 10000. */
  timeoutMs: number;
  /** `WEBHOOK_ALLOW_PRIVATE`: allow loopback, private and link-local addresses. Default false. */
  allowPrivate: boolean;
  /** Internal, for tests: how names are resolved before the guard sees them. Default `dns.lookup`. */
  resolve?: Resolve;
  /** Connections kept per origin. Default 8. */
  connectionsPerOrigin?: number;
}

export interface WebhookSender {
  post(url: string, headers: SignedHeaders, body: string, signal?: AbortSignal): Promise<AttemptResult>;
  close(): Promise<void>;
}

const USER_AGENT = 'cards-sync-webhooks/1';

export function createWebhookSender(options: SenderOptions): WebhookSender {
  const agent = new Agent({
    connections: options.connectionsPerOrigin ?? 8,
    keepAliveTimeout: 30_000,
    headersTimeout: options.timeoutMs + 1000,
    bodyTimeout: options.timeoutMs + 1000,
    // HTTP/1.1, one POST per socket, as `connections` counts them: undici 8 would otherwise speak
    // HTTP/2 to an HTTPS receiver that offers it.
    allowH2: false,
    // The check happens on the address the socket connects to, not on an earlier answer.
    connect: options.allowPrivate ? {} : { lookup: guardedLookupWith(options.resolve) as never },
  });

  async function post(
    url: string,
    headers: SignedHeaders,
    body: string,
    signal?: AbortSignal,
  ): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failed = (errorCode: string, excerpt: string, status: number | null = null): AttemptResult => ({
      delivered: false,
      status,
      latencyMs: elapsed(),
      errorCode,
      excerpt,
      retryAfterMs: null,
    });
    const target = new URL(url);
    const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    // A literal address never reaches the lookup: it is checked here, where nothing can change it.
    if (!options.allowPrivate && isIP(host) && !isPublicAddress(host)) {
      return failed(
        'address_refused',
        new WebhookAddressError(`webhook address ${host} is not public`).message,
      );
    }
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, options.timeoutMs);
    const cancel = () => controller.abort();
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
    try {
      const response = await agent.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
        body,
        signal: controller.signal,
      });
      response.body.on('error', () => {});
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        chunks.push(chunk as Buffer);
        size += (chunk as Buffer).length;
        if (size >= MAX_ANSWER_BYTES) {
          response.body.destroy();
          break;
        }
      }
      const status = response.statusCode;
      const text = Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
      const excerpt = redactExcerpt(text, [], EXCERPT_CHARS);
      if (status >= 200 && status <= 299) {
        return {
          delivered: true,
          status,
          latencyMs: elapsed(),
          errorCode: null,
          excerpt,
          retryAfterMs: null,
        };
      }
      const retryAfter = response.headers['retry-after'];
      return {
        delivered: false,
        status,
        latencyMs: elapsed(),
        errorCode: status >= 300 && status <= 399 ? 'redirect' : 'http_status',
        excerpt:
          status >= 300 && status <= 399
            ? `redirect not followed${excerpt === '' ? '' : `: ${excerpt}`}`.slice(0, EXCERPT_CHARS)
            : excerpt,
        retryAfterMs: retryAfter === undefined ? null : parseRetryAfter(retryAfter),
      };
    } catch (error) {
      if (timedOut) return failed('timeout', `no answer within ${options.timeoutMs} ms`);
      if (signal?.aborted) return failed('stopped', 'the worker stopped during the attempt');
      const cause = (error as { cause?: unknown }).cause ?? error;
      if (cause instanceof WebhookAddressError || error instanceof WebhookAddressError) {
        return failed('address_refused', (cause as Error).message);
      }
      const code = (cause as { code?: string }).code ?? (error as { code?: string }).code;
      return failed(
        'connect',
        redactExcerpt(`${code ?? ''} ${(cause as Error).message ?? String(cause)}`.trim(), [], 200),
      );
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', cancel);
    }
  }

  return { post, close: () => agent.close() };
}

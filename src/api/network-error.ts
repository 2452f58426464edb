import { errors } from 'undici';
import type { FetchOutcome } from './lookup.js';

/**
 * A request that ended without a whole HTTP answer (the deadline, the caller's cancellation, a
 * socket timeout, a refused or reset connection), as a transient outcome.
 */
export function classifyNetworkError(
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

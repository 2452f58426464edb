// Job payloads carry the version of the release that wrote them (`v`). During a rolling upgrade a
// newer release may write payloads an older worker cannot read right: the older worker hands such
// a job back (delayed, no attempt used, no request spent) for a newer worker to take. A payload
// without `v` comes from a release before versions and is read as it always was.

/** How long a handed-back job waits before a worker looks at it again. */
export const NEWER_PAYLOAD_HOLD_MS = 15_000;

/** The payload's version when it is newer than `known`; undefined otherwise. */
export function newerPayload(data: unknown, known: number): number | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const v = (data as { v?: unknown }).v;
  return typeof v === 'number' && Number.isInteger(v) && v > known ? v : undefined;
}

/**
 * The batch was committed, but a reply to one of its statements could not be read: its rows are
 * stored, its results are unknown. Not to be written again answer by answer.
 */
export class CommittedUnreadError extends Error {
  override readonly name = 'CommittedUnreadError';
  constructor(cause: unknown) {
    super('the batch was committed, but a reply to it could not be read', { cause });
  }
}

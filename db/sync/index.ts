// The sync's statements: a batch's read and its one write, the card shapes db/ and src/ share,
// conflicts, digests, not-found answers, the ledger row and Postgres's clock.

export {
  type BatchRead,
  beginLockAndRead,
  type CardOwner,
  lockAndReread,
  readStoredCards,
} from './batch-read.js';
export { type BatchWrite, type KnownChange, learnEmails, type RunRow, writeBatch } from './batch-write.js';
export type { CardToWrite, SavedCard, StoredCard, StoredToken } from './cards.js';
export { type ClockOptions, dbClock } from './clock.js';
export {
  type CardClaim,
  claimKey,
  conflictSummary,
  type OpenConflict,
  openClaims,
  openConflictsOf,
  resolveClaims,
  upsertClaims,
} from './conflicts.js';
export { forgetDigestsOfTakenCards, recountActiveCards } from './digests.js';
export { recordNotFound } from './not-found.js';
export { sentTogether } from './pipeline.js';
export {
  findSubscriberIdByEmail,
  insertSyncRun,
  recordSubscriberFailure,
  registerSubscribers,
} from './subscribers.js';

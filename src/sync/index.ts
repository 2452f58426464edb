// The sync of one subscriber: its target, the sync itself with its outcome, the batch's group
// commit, and reconciling an answer with what is stored.

export { createGroupCommitter } from './group-commit.js';
export { reconcile } from './reconcile.js';
export { type SyncDeps, type SyncResult, syncSubscriber } from './sync-subscriber.js';
export { parseEmail, parseSubscriberId, parseTarget, TargetError } from './targets.js';

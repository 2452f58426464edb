// How a subscriber is named on a command line or in a file of ids: the parsers `enqueue` and `sync`
// read their flags with, loading nothing of the sync itself (docs/architecture.md, "Light fronts").

export { parseEmail, parseSubscriberId, parseTarget, TargetError } from './targets.js';

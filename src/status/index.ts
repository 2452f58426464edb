// What the entry points tell people of the state of things, shared by `status` (src/cli) and the
// admin overview (src/admin) so that both say it alike: how far the stale estimate can be trusted,
// the continuous refresh's figures, and the lines of a pause and of a rejected API key. It sits with
// the entry points (docs/architecture.md): it reads the queues' shapes from jobs/ and the stored
// ones from db/, and queries neither.

export { describeRejection, pauseDetailLines, rejectedKeyLines } from './pause.js';
export { type ContinuousStatus, continuousStatus, estimateBasis, isContinuous } from './refresh.js';

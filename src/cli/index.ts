// The CLI (docs/commands.md). bin/cards-sync.js runs its entry point, main.ts, which builds the
// program (program.ts); nothing else imports the commands. What other code uses is the check of
// Redis that the demo shares with them.

export { ensureRedis } from './common.js';

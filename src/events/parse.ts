// The change feed's cursor, checked without the database: for `changes --since` and
// `webhooks replay --since` (docs/architecture.md, "Light fronts").

export { CursorError, parseCursor } from './cursor.js';

// What the schema's checks allow, for the parsers of the layers above: importing it loads no driver
// (src/cli's flag parsers reach it while `--help` is printed; docs/architecture.md, "Light fronts").

export { CHANGE_EVENT_TYPES } from './event-types.js';

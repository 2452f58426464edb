// The admin server: started by `serve`, by `worker --admin` and by the demo.

export { startAdmin } from './start.js';

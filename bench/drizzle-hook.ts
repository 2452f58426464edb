import { resolveDrizzleFilesDirectly } from '../src/cli/drizzle-resolve.js';

// Preloaded (`--import`) into the pipeline workers, as bin/cards-sync.js does for the product's
// own processes, so that the bench's workers load drizzle-orm as the product does
// (src/cli/drizzle-resolve.ts).
resolveDrizzleFilesDirectly();

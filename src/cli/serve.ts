import { startAdmin } from '../admin/index.js';
import type { Config } from '../config/index.js';
import { createLogger } from '../logging/index.js';
import { createMetrics } from '../metrics/index.js';
import { onShutdown } from '../shared/index.js';
import type { Io } from './common.js';

/** What the admin server's tokens allow, when not everything. */
function accessNote(config: Config): string {
  if (config.adminToken) return '';
  return config.adminReadToken
    ? ' (read-only: ADMIN_READ_TOKEN may look; set ADMIN_TOKEN to act)'
    : ' (write routes and dashboard off: set ADMIN_TOKEN)';
}

/** `cards-sync serve`: the admin HTTP server alone. */
export async function cmdServe(
  config: Config,
  io: Io,
  opts: { host?: string; port?: number },
): Promise<number> {
  const logger = createLogger({ level: config.logLevel });
  const metrics = createMetrics();
  const admin = await startAdmin(config, { logger, metrics }, opts, true);
  io.out(`admin server on ${admin.url}${accessNote(config)}`);
  return new Promise<number>(() => {
    onShutdown(async () => {
      await admin.stop();
      return 0;
    }, 10_000);
  });
}

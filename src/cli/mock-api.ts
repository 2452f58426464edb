import { loadConfig } from '../config/index.js';
import {
  type ChangeClass,
  type ChangeKinds,
  type CreatedDates,
  createMockApi,
  type MockFaults,
  type WakeUp,
} from '../mock-api/index.js';
import { CliError, onShutdown } from '../shared/index.js';
import type { Io } from './common.js';

export interface MockApiCliOptions {
  port: number;
  host: string;
  apiKey?: string;
  latencyMs: number;
  failRate: number;
  notFoundEvery: number;
  cardsPerSubscriber?: number;
  generation: number;
  faults?: MockFaults;
  changes?: ChangeClass[];
  createdDates?: CreatedDates;
  wakeUp?: WakeUp;
  changeKinds?: ChangeKinds;
  walletCards?: { minCards: number; maxCards: number };
}

/** `--change-kinds` without `--wallet-cards`: 1 to 4 cards, as the default wallets hold. */
const DEFAULT_WALLET_CARDS = { minCards: 1, maxCards: 4 };

export async function cmdMockApi(io: Io, options: MockApiCliOptions): Promise<number> {
  // The key the sandbox accepts: --api-key, else CARDS_API_KEY or CARDS_API_KEY_FILE, else any.
  const apiKey =
    options.apiKey ?? loadConfig(io.env, { refreshUnused: { warn: io.err } }).api?.apiKey ?? undefined;
  if (options.walletCards && !options.changeKinds) {
    throw new CliError(
      '--wallet-cards needs --change-kinds (the default wallets draw 1 to 4 cards at each change)',
      2,
    );
  }
  if (options.changeKinds && !options.changes) {
    throw new CliError('--change-kinds needs --changes (the rates at which the wallets change)', 2);
  }
  const mock = createMockApi({
    ...(apiKey ? { apiKey } : {}),
    latencyMs: options.latencyMs,
    failRate: options.failRate,
    notFoundEvery: options.notFoundEvery,
    ...(options.cardsPerSubscriber !== undefined ? { cardsPerSubscriber: options.cardsPerSubscriber } : {}),
    generation: options.generation,
    ...(options.faults ? { faults: options.faults } : {}),
    ...(options.changes
      ? {
          changes: {
            classes: options.changes,
            ...(options.createdDates ? { createdDates: options.createdDates } : {}),
            ...(options.wakeUp ? { wakeUp: options.wakeUp } : {}),
            ...(options.changeKinds
              ? { wallets: { ...(options.walletCards ?? DEFAULT_WALLET_CARDS), kinds: options.changeKinds } }
              : {}),
          },
        }
      : {}),
  });
  try {
    await mock.start(options.port, options.host);
  } catch (error) {
    throw new CliError(
      `mock API cannot listen on ${options.host}:${options.port}: ${(error as Error).message}`,
      1,
    );
  }
  const changing = options.changes?.filter((c) => c.perSecond > 0) ?? [];
  io.out(
    `mock API listening on ${mock.url} (${apiKey ? 'checks the API key' : 'accepts any API key'}` +
      `${changing.length > 0 ? `; ${(changing.reduce((s, c) => s + c.share, 0) * 100).toFixed(1)}% of wallets change over time` : ''})`,
  );
  return new Promise<number>(() => {
    onShutdown(async () => {
      await mock.stop();
      return 0;
    }, 5000);
  });
}

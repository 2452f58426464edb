// What the cards-sync package exports for other programs (the CLI is bin/cards-sync.js).

export type { SavedCard, StoredToken } from '../db/sync/index.js';
export {
  CardConflictError,
  CardNotFoundError,
  type CardTokens,
  cardTokens,
  fetchCardToken,
  KeyRing,
  parseKeyRing,
  readCardToken,
  TokenKeyError,
} from './tokens/index.js';

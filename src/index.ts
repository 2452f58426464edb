// What the cards-sync package exports for other programs (the CLI is bin/cards-sync.js).

export type { SavedCard, StoredToken } from '../db/sync/cards.js';
export { type CardTokens, cardTokens } from './tokens/card-tokens.js';
export { KeyRing, parseKeyRing, TokenKeyError } from './tokens/keyring.js';
export {
  CardConflictError,
  CardNotFoundError,
  fetchCardToken,
  readCardToken,
} from './tokens/read-card-token.js';

// Card tokens and their keys (docs/configuration.md): the key ring, how the write path stores
// tokens, and reading one card's token back.

export { type CardTokens, cardTokens } from './card-tokens.js';
export { KeyRing, KeyRingError, newKeyMaterial, parseKeyRing, TokenKeyError } from './keyring.js';
export { CardConflictError, CardNotFoundError, fetchCardToken, readCardToken } from './read-card-token.js';

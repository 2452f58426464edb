// The card tokens' statements: which keys they are sealed under, and rotating them to the first key.

export { countToRotate, readStoredToken, rotateBatch } from './rotation.js';
export { sampledTokenKeys, tokensByKey } from './stored-keys.js';

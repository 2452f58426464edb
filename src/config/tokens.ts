import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../shared/index.js';
import { type CardTokens, cardTokens, type KeyRing, KeyRingError, parseKeyRing } from '../tokens/index.js';
import { blankToUndefined, type VariableSpec } from './schemas.js';

// Card tokens at rest (docs/configuration.md): CARD_TOKEN_KEYS / CARD_TOKEN_KEYS_FILE and CARD_TOKEN_ENCRYPTION.

export interface TokenConfig {
  /** `CARD_TOKEN_ENCRYPTION`: `on` (default) seals tokens; `off` stores them as received. */
  encryption: 'on' | 'off';
  /** The key ring, when `CARD_TOKEN_KEYS` or `CARD_TOKEN_KEYS_FILE` is set. */
  ring: KeyRing | undefined;
}

export const HOW_TO_MAKE_A_KEY =
  'generate a key with `openssl rand -base64 32` and set CARD_TOKEN_KEYS=k1:<that key> (or CARD_TOKEN_KEYS_FILE to a file holding it)';

/** The variables, in the form of config.ts's table. */
export const tokenVariables = {
  CARD_TOKEN_KEYS: {
    schema: z.preprocess(blankToUndefined, z.string().optional()),
    expect: 'keyId:base64-of-32-bytes[,keyId:…]',
    echo: false,
    fleet: 'own',
  },
  CARD_TOKEN_KEYS_FILE: {
    schema: z.preprocess(blankToUndefined, z.string().optional()),
    expect: 'a file path',
    echo: true,
    fleet: 'own',
  },
  CARD_TOKEN_ENCRYPTION: {
    schema: z.preprocess(
      (v) => (typeof v === 'string' ? blankToUndefined(v)?.toString().toLowerCase() : v),
      z.enum(['on', 'off']).optional(),
    ),
    expect: 'on or off',
    echo: true,
    fleet: 'shared',
  },
} as const satisfies Record<string, VariableSpec>;

function readKeysFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(
      `CARD_TOKEN_KEYS_FILE names a file that cannot be read (${reason}): ${path}`,
      'CARD_TOKEN_KEYS_FILE',
    );
  }
}

/** The token settings from the parsed variables; one line naming the variable, never a key. */
export function tokenConfig(e: {
  CARD_TOKEN_KEYS?: string | undefined;
  CARD_TOKEN_KEYS_FILE?: string | undefined;
  CARD_TOKEN_ENCRYPTION?: 'on' | 'off' | undefined;
}): TokenConfig {
  if (e.CARD_TOKEN_KEYS !== undefined && e.CARD_TOKEN_KEYS_FILE !== undefined) {
    throw new ConfigError(
      'set only one of CARD_TOKEN_KEYS and CARD_TOKEN_KEYS_FILE, not both',
      'CARD_TOKEN_KEYS',
    );
  }
  const name = e.CARD_TOKEN_KEYS_FILE !== undefined ? 'CARD_TOKEN_KEYS_FILE' : 'CARD_TOKEN_KEYS';
  const raw = e.CARD_TOKEN_KEYS_FILE !== undefined ? readKeysFile(e.CARD_TOKEN_KEYS_FILE) : e.CARD_TOKEN_KEYS;
  let ring: KeyRing | undefined;
  if (raw !== undefined) {
    try {
      ring = parseKeyRing(raw);
    } catch (error) {
      if (!(error instanceof KeyRingError)) throw error;
      throw new ConfigError(
        `${name} is not a key ring (keyId:base64-of-32-bytes[,keyId:…]): ${error.message}; ${HOW_TO_MAKE_A_KEY}`,
        name,
      );
    }
  }
  return { encryption: e.CARD_TOKEN_ENCRYPTION ?? 'on', ring };
}

/**
 * What a command that writes cards stores tokens with. With encryption on and no keys it refuses to
 * start (exit 2), saying how to make a key.
 */
export function requireCardTokens(t: TokenConfig): CardTokens {
  if (t.encryption === 'on' && t.ring === undefined) {
    throw new ConfigError(
      `CARD_TOKEN_KEYS is not set, and card tokens are stored encrypted (CARD_TOKEN_ENCRYPTION=on): ${HOW_TO_MAKE_A_KEY}; or set CARD_TOKEN_ENCRYPTION=off to store tokens as received`,
      'CARD_TOKEN_KEYS',
    );
  }
  return cardTokens(t.encryption === 'on', t.ring);
}

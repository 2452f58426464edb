import { readFileSync } from 'node:fs';
import { ConfigError } from '../shared/index.js';

/** The API key from `CARDS_API_KEY_FILE`: trimmed, and refused when unreadable, empty or not a header value. */
export function readApiKeyFile(path: string): string {
  let content: string;
  try {
    content = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(
      `CARDS_API_KEY_FILE names a file that cannot be read (${reason}): ${path}`,
      'CARDS_API_KEY_FILE',
    );
  }
  const key = content.trim();
  if (key === '')
    throw new ConfigError(`CARDS_API_KEY_FILE names an empty file: ${path}`, 'CARDS_API_KEY_FILE');
  if (!/^[\x21-\x7e]+$/.test(key)) {
    throw new ConfigError(
      'CARDS_API_KEY_FILE holds characters an HTTP header cannot carry (spaces or non-ASCII)',
      'CARDS_API_KEY_FILE',
    );
  }
  return key;
}

import { readFileSync } from 'node:fs';

/** The version in the package.json above this file (src/ when run from source, dist/src/ when built). */
export function packageVersion(): string {
  for (let dir = new URL('..', import.meta.url); dir.pathname !== '/'; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'cards-sync' && pkg.version) return pkg.version;
    } catch {}
  }
  return 'unknown';
}

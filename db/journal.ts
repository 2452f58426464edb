import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The migrations this release ships: db/migrations/meta/_journal.json, found beside the code.

/** The committed migrations folder, found from here whether running from source or `dist/`. */
export function migrationsFolder(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'db', 'migrations');
    if (existsSync(join(candidate, 'meta', '_journal.json'))) return candidate;
    if (existsSync(join(dir, 'migrations', 'meta', '_journal.json'))) return join(dir, 'migrations');
    dir = dirname(dir);
  }
  throw new Error('db/migrations not found next to the installed cards-sync');
}

export function journal(folder = migrationsFolder()): { entries: { tag: string }[] } {
  return JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
}

/** How many migrations this release ships (db/migrations/meta/_journal.json). */
export function shippedCount(): number {
  return journal().entries.length;
}

/** The newest migration this release ships, by its tag (`0017_fleet_processes`). */
export function knownMigration(): string {
  return journal().entries.at(-1)?.tag ?? 'none';
}

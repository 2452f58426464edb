import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrationsFolder, runMigrations } from '../../db/migrate.js';
import { seedingPool } from '../harness.js';
import { sec, timed } from './measure.js';
import { COLUMNS, runsOf } from './sql.js';
import { startWriter } from './writer.js';

// The ledger bench's last phase: a ledger of the previous release, `convertRuns` runs over 90 days,
// converted by `migrate` while the writer inserts: how long syncs were held, in all and at once.

/** Converts a ledger of `convertRuns` runs in a database of its own (`url`'s name + `_convert`). */
export async function conversion(url: string, convertRuns: number) {
  const convertUrl = url.replace(/\/([^/]+)$/, '/$1_convert');
  const admin = new pg.Client({ connectionString: convertUrl.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`drop database if exists "${new URL(convertUrl).pathname.slice(1)}" with (force)`);
  await admin.end();
  const folder = releaseBefore('0019_ledger_partitions');
  await runMigrations(convertUrl, { folder });
  rmSync(folder, { recursive: true, force: true });
  const pool = seedingPool(convertUrl, 2);
  const span = 90 * 86_400;
  const per = Math.ceil(convertRuns / 10);
  const [, loadMs] = await timed(async () => {
    for (let a = 0; a < convertRuns; a += per) {
      const b = Math.min(convertRuns, a + per);
      await pool.query(`insert into sync_runs (${COLUMNS}) ${runsOf(a, b, 0, convertRuns)}`, [
        new Date(Date.now() - span * 1000),
        span,
      ]);
    }
    await pool.query('vacuum analyze sync_runs');
  });
  console.log(
    `conversion: a ledger of ${convertRuns.toLocaleString('en')} runs (previous release) loaded in ${sec(loadMs)}`,
  );
  const writer = startWriter(convertUrl, 'sync_runs');
  await new Promise((r) => setTimeout(r, 1000));
  const [, migrateMs] = await timed(() => runMigrations(convertUrl));
  await new Promise((r) => setTimeout(r, 1000));
  const held = await writer.stop();
  const { rows } = await pool.query<{ n: string }>('select count(*) as n from sync_runs');
  await pool.end();
  console.log(
    `conversion: migrate took ${sec(migrateMs)}; the writer's longest insert ${held.maxMs.toFixed(0)} ms, ` +
      `held ${held.heldMs.toFixed(0)} ms in all (target <= 5000), ${held.inserts} inserts; ${Number(rows[0]!.n).toLocaleString('en')} runs after`,
  );
  return { runs: convertRuns, migrateMs, writer: held };
}

/** The release's migrations before `tag`, in a folder of their own. */
function releaseBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  cpSync(migrationsFolder(), dir, { recursive: true });
  const path = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(path, 'utf8')) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(
    0,
    journal.entries.findIndex((e) => e.tag === tag),
  );
  writeFileSync(path, JSON.stringify(journal));
  return dir;
}

import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import cliProgress from 'cli-progress';
import { createDb } from '../../db/client.js';
import { createRedis } from '../../jobs/redis.js';
import { createSyncQueue, requestSyncs } from '../../jobs/sync/index.js';
import type { Target } from '../api/index.js';
import type { Config } from '../config/index.js';
import { CliError, readLines } from '../shared/index.js';
import { auditCli } from './audit.js';
import { ensureRedis, type Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { judgeLine } from './enqueue-lines.js';

/** Jobs per `addBulk`: one Redis round trip each, a bounded amount of memory. */
const ENQUEUE_CHUNK = 1000;
/** Rejected lines listed one by one; beyond, only counted. */
const REJECTS_LISTED = 20;

export interface EnqueueOptions {
  ids: number[];
  emails: string[];
  /** A path, or `-` for standard input. */
  file?: string;
  /** Refuse the whole file, enqueueing nothing, when one line is bad. */
  strict: boolean;
  /** Read this field (from 1) of each line as CSV, instead of the whole line. Default: the whole line. */
  column?: number;
}

export interface EnqueueStreams {
  stdin: Readable;
  /** Whether standard error is a terminal (progress bar) or not (periodic plain lines). */
  isTTY: boolean;
}

interface Tally {
  /** Valid targets handed to the queue. */
  sent: number;
  lines: number;
  blank: number;
  /** Line 1 named a column (an export's header) and was skipped. */
  header: boolean;
  enqueued: number;
  alreadyQueued: number;
  promoted: number;
  /** Ids not known before, now known as never synced (see `registerSubscribers`). */
  registered: number;
  rejected: number;
  /** `line`: the file's line number, or 0 for an argument (`argument` its place among them). */
  rejects: { line: number; argument?: number; reason: string }[];
}

async function openFile(path: string): Promise<{ stream: Readable; size?: number }> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (error) {
    throw new CliError(
      `--file ${path}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : 'cannot be read'}`,
      2,
    );
  }
  if (info.isDirectory()) throw new CliError(`--file ${path}: is a directory, not a file`, 2);
  return {
    stream: createReadStream(path, { highWaterMark: 256 * 1024 }),
    size: info.isFile() ? info.size : undefined,
  };
}

/** What the audit trail keeps of an enqueue: counts and the file, never the ids or e-mails themselves. */
function auditDetail(tally: Tally, opts: EnqueueOptions): Record<string, unknown> {
  return {
    enqueued: tally.enqueued,
    alreadyQueued: tally.alreadyQueued,
    promoted: tally.promoted,
    registered: tally.registered,
    rejected: tally.rejected,
    ids: opts.ids.length,
    emails: opts.emails.length,
    // With a file, how many of its lines (ids and e-mails alike): `ids` counts the --id values only.
    ...(opts.file !== undefined
      ? {
          file: opts.file === '-' ? 'stdin' : opts.file,
          fileLines: tally.lines - tally.blank - (tally.header ? 1 : 0),
        }
      : {}),
  };
}

/** Strict mode: checks every line first; returns the rejects (none = go ahead). */
async function validateAll(
  stream: Readable,
  column: number | undefined,
): Promise<Tally['rejects'] & { total?: number }> {
  const rejects: Tally['rejects'] & { total?: number } = [];
  let total = 0;
  for await (const line of readLines(stream)) {
    const verdict = judgeLine(line, column);
    if ('reason' in verdict) {
      total++;
      if (rejects.length < REJECTS_LISTED) rejects.push({ line: line.number, reason: verdict.reason });
    }
  }
  rejects.total = total;
  return rejects;
}

export async function cmdEnqueue(
  config: Config,
  io: Io,
  opts: EnqueueOptions,
  streams: EnqueueStreams,
): Promise<number> {
  if (opts.ids.length === 0 && opts.emails.length === 0 && opts.file === undefined) {
    throw new CliError('enqueue needs --id N, --email E or --file PATH (- for standard input)', 2);
  }
  if (opts.column !== undefined && opts.file === undefined) {
    throw new CliError(
      '--column N picks a column of the lines of --file: give --file PATH (- for standard input)',
      2,
    );
  }
  let spoolDir: string | undefined;
  let source: { stream: Readable; size?: number } | undefined;
  if (opts.file !== undefined) {
    if (opts.file === '-' && opts.strict) {
      // Standard input can be read once: keep a copy to check first and enqueue after.
      spoolDir = await mkdtemp(join(tmpdir(), 'cards-sync-enqueue-'));
      await pipeline(streams.stdin, createWriteStream(join(spoolDir, 'stdin')));
    }
    const path = spoolDir ? join(spoolDir, 'stdin') : opts.file;
    if (opts.strict) {
      const rejects = await validateAll((await openFile(path)).stream, opts.column);
      if ((rejects.total ?? 0) > 0) {
        for (const r of rejects) io.err(`line ${r.line}: ${r.reason}`);
        if ((rejects.total ?? 0) > rejects.length)
          io.err(`… and ${(rejects.total ?? 0) - rejects.length} more rejected lines`);
        io.out(`enqueued 0, already queued 0, rejected ${rejects.total} (--strict: nothing enqueued)`);
        if (spoolDir) await rm(spoolDir, { recursive: true, force: true });
        return 1;
      }
    }
    source = path === '-' ? { stream: streams.stdin } : await openFile(path);
  }

  const redis = createRedis(config.redis);
  const queue = createSyncQueue(redis, { prefix: config.queuePrefix, attempts: config.syncAttempts });
  const tally: Tally = {
    sent: 0,
    lines: 0,
    blank: 0,
    header: false,
    enqueued: 0,
    alreadyQueued: 0,
    promoted: 0,
    registered: 0,
    rejected: 0,
    rejects: [],
  };
  // New ids become known subscribers as they are enqueued (db/sync/subscribers.ts). Without the
  // database the enqueue still goes ahead: their first syncs make them known, as before. A failure
  // of one chunk (a lock, a timeout) does not stop the next from trying; a lost connection does.
  const database = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  let registering = true;
  let registerWarned = false;
  const registerFailed = (error: Error) => {
    const unreachable = describeDbError(error, config.databaseUrl);
    if (unreachable !== undefined) registering = false;
    if (registerWarned && unreachable === undefined) return;
    registerWarned = true;
    io.err(
      'cards-sync: warning: new subscribers could not be recorded as known (they are enqueued all the same, ' +
        `and known from their first sync): ${unreachable ?? error.message}`,
    );
  };
  let bar: cliProgress.SingleBar | undefined;
  try {
    await ensureRedis(redis, config.redis);
    const direct: Target[] = [
      ...opts.ids.map((subscriberId) => ({ subscriberId })),
      ...opts.emails.map((email) => ({ email })),
    ];
    // Subscribers named on the command line take the ops lane; a file's lines the bulk lane just
    // behind it, so that one large file does not hold up the next single re-sync (jobs/sync/lanes.ts).
    // `lines`: each target's line in the file; none for the command line's own.
    const add = async (targets: Target[], lane: 'ops' | 'bulk', lines?: number[]) => {
      tally.sent += targets.length;
      const counts = await requestSyncs(
        { syncQueue: queue, db: registering ? database.db : undefined },
        targets,
        { trigger: 'manual', lane, refreshMaxAgeMs: config.refreshMaxAgeMs },
      );
      tally.registered += counts.registered;
      if (counts.registerError !== undefined) registerFailed(counts.registerError);
      tally.enqueued += counts.enqueued;
      tally.alreadyQueued += counts.alreadyQueued;
      tally.promoted += counts.promoted;
      // A target the queue refused is a rejected line like any other: the rest went in.
      for (const r of counts.refused) {
        tally.rejected++;
        if (tally.rejects.length < REJECTS_LISTED) {
          const line = lines?.[r.index] ?? 0;
          tally.rejects.push(
            line > 0 ? { line, reason: r.reason } : { line, argument: r.index + 1, reason: r.reason },
          );
        }
      }
    };
    await add(direct, 'ops');

    if (source !== undefined) {
      const showBar = streams.isTTY && source.size !== undefined && source.size > 0;
      if (showBar) {
        bar = new cliProgress.SingleBar(
          {
            format:
              'enqueue [{bar}] {percentage}% | {lines} lines | {enqueued} enqueued | {rejected} rejected',
            stream: process.stderr,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(source.size!, 0, { lines: 0, enqueued: 0, rejected: 0 });
      }
      let bytes = 0;
      let lastReport = Date.now();
      let chunk: Target[] = [];
      let chunkLines: number[] = [];
      for await (const line of readLines(source.stream)) {
        tally.lines++;
        bytes += line.bytes + 1;
        const verdict = judgeLine(line, opts.column);
        if ('skip' in verdict) {
          if (verdict.skip === 'blank') tally.blank++;
          else tally.header = true;
        } else if ('reason' in verdict) {
          tally.rejected++;
          if (tally.rejects.length < REJECTS_LISTED)
            tally.rejects.push({ line: line.number, reason: verdict.reason });
        } else {
          chunk.push(verdict.target);
          chunkLines.push(line.number);
          if (chunk.length >= ENQUEUE_CHUNK) {
            await add(chunk, 'bulk', chunkLines);
            chunk = [];
            chunkLines = [];
          }
        }
        if (Date.now() - lastReport >= 1000) {
          lastReport = Date.now();
          const values = { lines: tally.lines, enqueued: tally.enqueued, rejected: tally.rejected };
          if (bar) bar.update(Math.min(bytes, source.size!), values);
          else
            io.err(
              `enqueue: ${tally.lines} lines read, ${tally.enqueued} enqueued, ${tally.alreadyQueued} already queued, ${tally.rejected} rejected`,
            );
        }
      }
      await add(chunk, 'bulk', chunkLines);
      bar?.update(source.size ?? 0, {
        lines: tally.lines,
        enqueued: tally.enqueued,
        rejected: tally.rejected,
      });
      bar?.stop();
      bar = undefined;
    }
  } catch (error) {
    // Some jobs may be on the queue already: that much was done.
    if (tally.sent > 0) await auditCli(config, io, 'enqueue', { ...auditDetail(tally, opts), failed: true });
    throw error;
  } finally {
    bar?.stop();
    await queue.close().catch(() => {});
    redis.disconnect();
    await database.close().catch(() => {});
    if (spoolDir) await rm(spoolDir, { recursive: true, force: true });
  }
  if (tally.registered > 0)
    io.err(
      `${tally.registered} of them ${tally.registered === 1 ? 'was a new subscriber' : 'were new subscribers'}: known from now on, never synced until their job runs`,
    );
  if (tally.header) io.err('line 1 names a column (a header), not an id or an e-mail: skipped');
  for (const r of tally.rejects)
    io.err(r.line > 0 ? `line ${r.line}: ${r.reason}` : `argument ${r.argument}: ${r.reason}`);
  if (tally.rejected > tally.rejects.length)
    io.err(`… and ${tally.rejected - tally.rejects.length} more rejected lines`);
  io.out(
    `enqueued ${tally.enqueued}, already queued ${tally.alreadyQueued}, rejected ${tally.rejected}` +
      (tally.promoted > 0
        ? tally.promoted === 1
          ? ' (1 of them was waiting in a refresh and moved ahead of it)'
          : ` (${tally.promoted} of them were waiting in a refresh and moved ahead of it)`
        : ''),
  );
  if (tally.sent > 0) await auditCli(config, io, 'enqueue', auditDetail(tally, opts));
  return tally.rejected > 0 ? 1 : 0;
}

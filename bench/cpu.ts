import { readdirSync, readFileSync } from 'node:fs';
import type { RedisClient } from '../jobs/redis.js';

// CPU time of the parts of a pipeline, so that the benchmark can say where each subscriber's cost
// goes. Linux /proc only (the build machine); elsewhere the figures read 0.

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS = 100;

function procCpuMs(pid: number, withChildren = false): number {
  try {
    // Fields after the command name (which may hold spaces): utime is field 14, stime 15, and
    // cutime/cstime (16, 17) the time of children that have exited and been reaped.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const ticks = f[11]! + f[12]! + (withChildren ? f[13]! + f[14]! : 0);
    return (ticks * 1000) / TICKS;
  } catch {
    return 0;
  }
}

/** CPU ms of one process so far. */
export const processCpuMs = (pid: number) => procCpuMs(pid);

/**
 * CPU ms used so far by every local `postgres` process (server, backends, WAL writer…), including
 * backends that have exited since: the postmaster reaps them, so their time is in its children's.
 */
export function postgresCpuMs(): number {
  let total = 0;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
    } catch {
      continue;
    }
    total += procCpuMs(Number(entry), true);
  }
  return total;
}

/** CPU ms Redis reports having used (user + system). */
export async function redisCpuMs(redis: RedisClient): Promise<number> {
  const info = await redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1000;
}

import { readFileSync, writeFileSync } from 'node:fs';

// Preloaded into a benchmark's worker (`node --import …/main-thread-cpu.js`): at exit, writes the
// CPU seconds of the process's main thread (user + system, from /proc) to the file named by
// BENCH_MAIN_THREAD_CPU_FILE. The main thread runs the JavaScript; the rest of the process's CPU
// (/usr/bin/time's total less this) is V8's helper threads (concurrent and parallel garbage
// collection, compilation) and libuv's pool: bench/tracing.ts reports the two apart.

const file = process.env.BENCH_MAIN_THREAD_CPU_FILE;
if (file) {
  process.on('exit', () => {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    // USER_HZ is 100 on Linux.
    writeFileSync(file, String(ticks / 100));
  });
}

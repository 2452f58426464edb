import { readFileSync, writeFileSync } from 'node:fs';

// Preloaded into a benchmark's worker (`node --import …/main-thread-cpu.js`): at exit, writes the
// CPU seconds (user + system, from /proc) of the process's main thread and of the whole process,
// read at the same moment, as JSON to the file named by BENCH_MAIN_THREAD_CPU_FILE. The main
// thread runs the JavaScript; the rest is V8's helper threads (concurrent and parallel garbage
// collection, compilation) and libuv's pool: bench/tracing.ts reports the two apart.

/** utime + stime of a /proc stat line, in seconds (USER_HZ is 100 on Linux). */
function cpuSeconds(path: string): number {
  const stat = readFileSync(path, 'utf8');
  // The fields after the command name (which may hold spaces and parentheses): utime, stime are
  // the 14th and 15th of the line, the 12th and 13th after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const file = process.env.BENCH_MAIN_THREAD_CPU_FILE;
if (file) {
  process.on('exit', () => {
    const main = cpuSeconds(`/proc/self/task/${process.pid}/stat`);
    const total = cpuSeconds('/proc/self/stat');
    writeFileSync(file, JSON.stringify({ main, total }));
  });
}

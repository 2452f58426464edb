import pg from 'pg';

// The ledger bench's writer: a sync's insert every 2 ms while retention or migrate runs, so that
// its longest insert says how long a sync was held.

/** Inserts one run every 2 ms into `table` until stopped; reports its inserts' latencies. */
export function startWriter(databaseUrl: string, table: string) {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench writer' });
  const latencies: number[] = [];
  let stop = false;
  const done = (async () => {
    await client.connect();
    while (!stop) {
      const t0 = performance.now();
      await client.query(
        `insert into ${table} (subscriber_id, trigger, started_at, finished_at, status) values (1, 'manual', now(), now(), 'succeeded')`,
      );
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 2));
    }
    await client.end();
  })();
  return {
    async stop() {
      stop = true;
      await done;
      const sorted = [...latencies].sort((a, b) => a - b);
      const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
      return {
        inserts: latencies.length,
        medianMs: median,
        maxMs: sorted.at(-1) ?? 0,
        /** Time the writer spent beyond its usual insert, in inserts that took over 20 ms. */
        heldMs: latencies.filter((l) => l > 20).reduce((s, l) => s + l - median, 0),
      };
    },
  };
}

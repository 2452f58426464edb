import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback that a test can cut (every open connection reset, new ones refused) or
 * stall (open connections go silent, as behind a dropped NAT entry, while new ones work).
 */
export interface TcpProxy {
  port: number;
  /** Resets every open connection and refuses new ones until `restore()`. */
  cut(): void;
  restore(): void;
  /** Connections reset by `cut()` so far. */
  resets: number;
  /** Stops every open connection's traffic both ways, for good; new connections are not affected. */
  stall(): void;
  /** Connections stalled by `stall()` so far. */
  stalls: number;
  close(): Promise<void>;
}

async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
  const pairs = new Map<Socket, { upstream: Socket; drop: () => void }>();
  let down = false;
  const proxy: TcpProxy = {
    port: 0,
    resets: 0,
    cut() {
      down = true;
      for (const s of open) {
        s.resetAndDestroy();
        proxy.resets++;
      }
      open.clear();
    },
    restore() {
      down = false;
    },
    stalls: 0,
    stall() {
      for (const [client, { upstream, drop }] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        // Not even a close crosses a silent network: each side is left to find out by itself.
        for (const s of [client, upstream])
          s.off('close', drop)
            .off('error', drop)
            .on('error', () => {});
        proxy.stalls++;
      }
      pairs.clear();
    },
    async close() {
      proxy.cut();
      server.close();
      await once(server, 'close');
    },
  };
  const server = createServer((client) => {
    if (down) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    open.add(client);
    open.add(upstream);
    const drop = () => {
      open.delete(client);
      open.delete(upstream);
      pairs.delete(client);
      client.destroy();
      upstream.destroy();
    };
    pairs.set(client, { upstream, drop });
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy.port = (server.address() as { port: number }).port;
  return proxy;
}

/** A proxy in front of the Postgres of `databaseUrl`, and the same URL through it. */
export async function proxyDatabase(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(databaseUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${proxy.port}`;
  return { proxy, url: url.toString() };
}

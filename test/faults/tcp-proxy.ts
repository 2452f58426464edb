import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/** A TCP proxy on loopback that a test can cut: every open connection reset, new ones refused. */
export interface TcpProxy {
  port: number;
  /** Resets every open connection and refuses new ones until `restore()`. */
  cut(): void;
  restore(): void;
  /** Connections reset by `cut()` so far. */
  resets: number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
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
      client.destroy();
      upstream.destroy();
    };
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

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeCa, makeServerCert } from '../certificates.js';
import {
  type Auth,
  commonArgs,
  type Launch,
  makeTempDir,
  passwordArgs,
  type ServerProcess,
  startAll,
  stopServers,
} from './servers.js';

// ---------------------------------------------------------------------------------------------
// TLS

/** One Redis with TLS only (`--port 0 --tls-port P`), certificates from a throwaway CA made with openssl. */
export interface TlsRedisHandle {
  port: number;
  /** The CA that signed the server certificate (for 127.0.0.1 and localhost). */
  caFile: string;
  /** a CA that did NOT sign the server cert, to test refusal */
  otherCaFile: string;
  /** Kills the server, removes the temp dir; safe to call more than once. */
  stop(): Promise<void>;
}

export async function startTlsRedis(options: { password?: string } = {}): Promise<TlsRedisHandle> {
  const dir = makeTempDir('tls');
  const servers: ServerProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stopServers(servers, dir);
    return stopping;
  };
  try {
    const caFile = makeCa(dir, 'ca', 'cards-sync test CA');
    const otherCaFile = makeCa(dir, 'other-ca', 'cards-sync unrelated test CA');
    const { certFile, keyFile } = makeServerCert(dir, 'ca');
    const launch = (port: number): Launch => {
      const logFile = join(dir, `redis-${port}.log`);
      return {
        logFile,
        args: [
          '--port',
          '0',
          '--tls-port',
          String(port),
          ...commonArgs(dir, logFile),
          '--tls-cert-file',
          certFile,
          '--tls-key-file',
          keyFile,
          '--tls-ca-cert-file',
          caFile,
          '--tls-auth-clients',
          'no',
          ...passwordArgs(options.password),
        ],
      };
    };
    const auth: Auth = { password: options.password, tls: { ca: readFileSync(caFile) } };
    const [server] = await startAll([{ what: 'TLS Redis', launch, auth }], servers);
    return { port: server!.node.port, caFile, otherCaFile, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

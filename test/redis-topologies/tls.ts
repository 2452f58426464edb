import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Auth,
  commonArgs,
  type Launch,
  makeTempDir,
  passwordArgs,
  type ServerProcess,
  startAll,
  stopServers,
  TIMEOUT_MS,
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

function openssl(dir: string, args: string[]): void {
  const result = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: TIMEOUT_MS });
  if (result.error || result.status !== 0) {
    throw new Error(`openssl ${args.join(' ')} failed: ${result.error?.message ?? result.stderr}`);
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA in `dir`: `<base>.key` and `<base>.crt`; returns the certificate's path. */
function makeCa(dir: string, base: string, commonName: string): string {
  openssl(dir, [
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return join(dir, `${base}.crt`);
}

/** A server key and certificate for 127.0.0.1 and localhost, signed by the CA `<ca>.crt`/`<ca>.key`. */
function makeServerCert(dir: string, ca: string): { certFile: string; keyFile: string } {
  writeFileSync(
    join(dir, 'server.ext'),
    [
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      '',
    ].join('\n'),
  );
  openssl(dir, ['req', ...EC_KEY, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-set_serial',
    `0x${randomBytes(8).toString('hex')}`,
    '-days',
    '2',
    '-extfile',
    'server.ext',
    '-out',
    'server.crt',
  ]);
  return { certFile: join(dir, 'server.crt'), keyFile: join(dir, 'server.key') };
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

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Throwaway certificate authorities and server certificates for TLS tests, made with openssl.

function openssl(dir: string, args: string[]): void {
  const result = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  if (result.error || result.status !== 0) {
    throw new Error(`openssl ${args.join(' ')} failed: ${result.error?.message ?? result.stderr}`);
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA in `dir`: `<base>.key` and `<base>.crt`; returns the certificate's path. */
export function makeCa(dir: string, base: string, commonName: string): string {
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

/** A server key and certificate for `altNames` (default 127.0.0.1 and localhost), signed by the CA `<ca>.crt`/`<ca>.key`. */
export function makeServerCert(
  dir: string,
  ca: string,
  altNames = 'IP:127.0.0.1,DNS:localhost',
): { certFile: string; keyFile: string } {
  writeFileSync(
    join(dir, 'server.ext'),
    [
      `subjectAltName=${altNames}`,
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

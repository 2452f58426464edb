import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What a Collector costs the exporter and no more: an OTLP/HTTP endpoint that reads each export
 * whole, counts its bytes and answers 200. Spans are not decoded (the worker's cost is measured,
 * not the receiver's).
 */
export async function startOtlpSink() {
  let exports = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => ({ exports, bytes }),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An attribute as OTLP/JSON encodes it. */
interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  service: string;
  pid: number | undefined;
  /** Every attribute of the span, its events, links and resource, as exported. */
  raw: OtlpAttribute[];
}

function decodeValue(v: Record<string, unknown>): unknown {
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v)
    return ((v.arrayValue as { values?: Record<string, unknown>[] }).values ?? []).map(decodeValue);
  return JSON.stringify(v);
}

function toObject(attributes: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((attributes ?? []).map((a) => [a.key, decodeValue(a.value)]));
}

const nanosToMs = (n: string | number) => Number(BigInt(n) / 1000n) / 1000;

/**
 * A local OTLP/HTTP receiver for traces in the JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`):
 * what a Collector would take in, decoded into spans.
 */
export async function startOtlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const resource = toObject(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              startMs: nanosToMs(s.startTimeUnixNano),
              endMs: nanosToMs(s.endTimeUnixNano),
              attributes: toObject(s.attributes),
              links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({
                traceId: l.traceId,
                spanId: l.spanId,
              })),
              service: String(resource['service.name']),
              pid: resource['process.pid'] as number | undefined,
              raw: [
                ...(rs.resource?.attributes ?? []),
                ...(s.attributes ?? []),
                ...(s.events ?? []).flatMap((e: { attributes?: OtlpAttribute[] }) => e.attributes ?? []),
                ...(s.links ?? []).flatMap((l: { attributes?: OtlpAttribute[] }) => l.attributes ?? []),
              ],
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

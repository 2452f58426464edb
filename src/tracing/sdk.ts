import { trace } from '@opentelemetry/api';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import {
  hostDetector,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
} from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';

/** The API path of a lookup by e-mail: the address must never reach a span. */
const EMAIL_PATH = /\/email\/[^/?#]*/;

/** A URL or path with the e-mail of a lookup by e-mail replaced by `{email}`. */
function redactUrl(url: string): string {
  return url.replace(EMAIL_PATH, '/email/{email}');
}

/**
 * The instrumentations of this project's own dependencies, configured so that no span holds a
 * secret or an e-mail:
 * - pg: query text (parameterised by Drizzle) but never the parameters' values
 *   (`enhancedDatabaseReporting` off), and only inside a trace: the background pollers and the
 *   jobs the sampler left out make none;
 * - undici: the API attempts and webhook POSTs, their status code; the lookup-by-e-mail path
 *   without the address; no query string; no headers (the API key travels in `authorization`,
 *   a webhook's signature in `webhook-signature`);
 * - pino: `trace_id`/`span_id`/`trace_flags` on every log line written inside a span; the lines
 *   themselves stay on standard error (no OpenTelemetry log export).
 */
/** The origin of a URL, or undefined when it is none. */
function originOf(url: string | undefined): string | undefined {
  return url === undefined ? undefined : URL.parse(url)?.origin;
}

function instrumentations(apiBaseUrl?: string) {
  const api = originOf(apiBaseUrl);
  return [
    new PgInstrumentation({
      enhancedDatabaseReporting: false,
      requireParentSpan: true,
      ignoreConnectSpans: true,
    }),
    new UndiciInstrumentation({
      requireParentforSpans: true,
      // Outside a trace (an unsampled job runs outside its span: src/tracing/otel.ts) a request is
      // left alone at once, before its URL is even parsed.
      ignoreRequestHook: () => trace.getActiveSpan() === undefined,
      // Never the query string, and the path only of the API's requests (the e-mail taken out): a
      // webhook receiver's URL may carry its token in either (Slack's and Discord's in the path),
      // so other origins show as `REDACTED`, as the semantic conventions put it.
      startSpanHook: (request) => {
        const url = new URL(request.path, request.origin);
        url.search = '';
        const path = url.origin === api ? redactUrl(url.pathname) : '/REDACTED';
        return { 'url.full': `${url.origin}${path}`, 'url.path': path, 'url.query': undefined };
      },
    }),
    new PinoInstrumentation({ disableLogSending: true }),
  ];
}

/**
 * The OpenTelemetry SDK as the standard variables configure it: `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` by default, `http/json`, `grpc`),
 * `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_SERVICE_NAME` (default `cards-sync`),
 * `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*` and the rest.
 *
 * Choices where the specification leaves them open:
 * - traces only: metrics stay with Prometheus (`/metrics`) and logs on standard error, unless
 *   `OTEL_METRICS_EXPORTER` / `OTEL_LOGS_EXPORTER` ask for them;
 * - the resource comes from the environment and the host, not from the process detector, which
 *   would export the command line (`enqueue --email …` holds an address).
 */
export function createSdk(env: NodeJS.ProcessEnv, version: string): NodeSDK {
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  return new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: 'cards-sync' }),
    resource: resourceFromAttributes({ 'service.version': version }),
    resourceDetectors: [resourceAttributesEnvDetector, serviceNameEnvDetector, hostDetector],
    instrumentations: instrumentations(env.CARDS_API_BASE_URL),
  });
}

/**
 * Starts the SDK. With `exportTimeoutMs`, its trace exporters give up an export after that long,
 * retries included, instead of the SDK's 10 s: a short command's last export then cannot hold it
 * when the Collector is down (docs/tracing.md). The exporters read their timeout from
 * the environment when start() builds them and only then, so the variable is set for that moment
 * and put back after (a lower value set by the operator is kept).
 */
export function startSdk(sdk: NodeSDK, env: NodeJS.ProcessEnv, exportTimeoutMs?: number): void {
  if (exportTimeoutMs === undefined) {
    sdk.start();
    return;
  }
  const name = 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT';
  const saved = env[name];
  const asked = Number(saved?.trim() || env.OTEL_EXPORTER_OTLP_TIMEOUT?.trim() || Number.NaN);
  env[name] = String(asked > 0 && asked < exportTimeoutMs ? asked : exportTimeoutMs);
  try {
    sdk.start();
  } finally {
    if (saved === undefined) delete env[name];
    else env[name] = saved;
  }
}

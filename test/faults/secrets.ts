import { passesLuhn } from '../../src/shared/card-number.js';
/** What must never reach a log line. */
export interface Secrets {
  apiKey?: string;
  adminToken?: string;
  /** Card-token key material and other tokens that must never reach a log. */
  otherSecrets?: readonly string[];
  /** Every card token the API handed out in the scenario. */
  cardTokens?: ReadonlySet<string>;
  /**
   * Flags anything shaped like a test card token, for a search that cannot list them: 32 hex
   * digits (the sandbox's) or `tok` and 29 digits (the fixtures'). Default false.
   */
  cardTokenShapes?: boolean;
}

/**
 * Searches log output for secrets: the API key, the admin token, any card token, and anything
 * shaped like a full card number (13 to 19 digits passing the Luhn check, pino's `time` field
 * aside). Returns one finding per hit, naming its kind and line, never the value.
 */
export function secretsIn(logs: readonly string[], secrets: Secrets): string[] {
  const found: string[] = [];
  logs.forEach((log, n) => {
    log.split('\n').forEach((line, i) => {
      const where = `log ${n + 1} line ${i + 1}`;
      if (secrets.apiKey && line.includes(secrets.apiKey)) found.push(`${where}: the API key`);
      if (secrets.adminToken && line.includes(secrets.adminToken)) found.push(`${where}: the admin token`);
      for (const key of secrets.otherSecrets ?? [])
        if (line.includes(key)) found.push(`${where}: a card-token key or an admin token`);
      // A trace id (OpenTelemetry's, on a line logged inside a span) is 32 hex digits too: not a token.
      const untraced = line.replace(/"trace_id":"[0-9a-f]{32}"/g, '');
      if (secrets.cardTokenShapes && /(?<![0-9a-z])(?:[0-9a-f]{32}|tok\d{29})(?![0-9a-z])/i.test(untraced)) {
        found.push(`${where}: something shaped like a card token`);
      }
      // A webhook signing secret is printed once, as a line of its own, by `webhooks add` and
      // `rotate-secret`; it must never be inside a log line (pino's JSON) or an error.
      if (/^\{"level"|error|Error/.test(line) && /whsec_[A-Za-z0-9+/]{20,}/.test(line))
        found.push(`${where}: a webhook signing secret`);
      if (secrets.cardTokens) {
        for (const word of line.match(/[0-9a-f]{32}/gi) ?? []) {
          if (secrets.cardTokens.has(word)) found.push(`${where}: a card token`);
        }
      }
      // An event id (`evt_` + a uuid) may hold a run of digits and hyphens that passes Luhn, and so
      // may a trace's ids (random hex, on a line logged inside a span, or in a W3C traceparent):
      // not a card.
      const scrubbed = line
        .replace(/"time":\d+/g, '')
        .replace(/evt_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, 'evt_')
        // Exactly a trace id's 32 and a span id's 16 hex digits, with a letter among them: a card
        // number (digits only) in either field is still found.
        .replace(/"trace_id":"(?=[0-9]{0,31}[a-f])[0-9a-f]{32}"/g, '"trace_id":""')
        .replace(/"span_id":"(?=[0-9]{0,15}[a-f])[0-9a-f]{16}"/g, '"span_id":""')
        .replace(/\b00-(?=[0-9]{0,31}[a-f])[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\b/g, '00-');
      for (const run of scrubbed.match(/(?<![\d.])\d(?:[ -]?\d){12,18}(?![\d.])/g) ?? []) {
        const digits = run.replace(/[ -]/g, '');
        if (digits.length >= 13 && digits.length <= 19 && passesLuhn(digits))
          found.push(`${where}: a card number`);
      }
    });
  });
  return found;
}

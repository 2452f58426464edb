// The faults `mock-api --faults` injects, and their flag's parser.

/** Faults the sandbox can inject, each as a share of requests. */
export interface MockFaults {
  /** 429 with `Retry-After: 1`. */
  rateLimited?: number;
  /** The answer comes after `slowMs` (past a client's deadline). */
  slow?: number;
  /** How late a slow answer is, ms. Default 5000. */
  slowMs?: number;
  /** Headers promise the whole body; half of it comes, then the connection is cut. */
  truncated?: number;
  /** A 200 whose body trickles in, a byte every half second, until the client gives up. */
  trickle?: number;
}

/** `429=0.01,slow=0.02,truncated=0.02,trickle=0.01` → faults; throws on anything else. */
export function parseFaults(spec: string): MockFaults {
  const names: Record<string, keyof MockFaults> = {
    '429': 'rateLimited',
    slow: 'slow',
    truncated: 'truncated',
    trickle: 'trickle',
  };
  const faults: MockFaults = {};
  for (const part of spec.split(',').filter(Boolean)) {
    const [name, value] = part.split('=');
    const key = names[name?.trim() ?? ''];
    const share = Number(value);
    if (!key || !(share >= 0 && share <= 1)) {
      throw new Error(
        `--faults takes name=share pairs (429, slow, truncated, trickle; share 0 to 1), not ${JSON.stringify(part)}`,
      );
    }
    faults[key] = share;
  }
  return faults;
}

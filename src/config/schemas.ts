import { z } from 'zod';

// The building blocks of the environment's schema (src/config/index.ts, src/config/redis.ts).

/** An empty or all-blank value counts as unset; surrounding blanks are dropped. */
export const blankToUndefined = (v: unknown) =>
  typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
export const text = z.preprocess(blankToUndefined, z.string().optional());

export const whole = (min: number, max: number) =>
  z.preprocess(
    blankToUndefined,
    z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(min).max(max)).optional(),
  );

export const urlOf = (...protocols: string[]) =>
  text.refine((v) => v === undefined || protocols.includes(URL.parse(v)?.protocol ?? ''));

export const isTimeZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/** One environment variable, as the tables of variables.ts, redis.ts and tokens.ts declare it. */
export interface VariableSpec {
  schema: z.ZodType;
  /** What a good value looks like, for the line that refuses a bad one. */
  expect: string;
  /** Whether a refused value may be echoed back (never for secrets, or URLs that may hold a password). */
  echo: boolean;
  /**
   * `shared`: the fleet's behaviour depends on it, so every worker must hold the same value; it is
   * published in the fleet registry and compared there (SETTINGS DIFFER, src/fleet/shared-settings.ts).
   * `own`: each process may hold its own (how it reaches a service, how hard it works, its secrets).
   */
  fleet: 'shared' | 'own';
  /** More about a refused value than `expect` says, appended to the line (only where `echo`). */
  explain?: (raw: string) => string | undefined;
}

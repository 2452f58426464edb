import { InvalidArgumentError } from 'commander';

// Parsers of the CLI's option values: each refuses a bad value with a one-line usage error.

/** A whole number from `min` to `max`. */
export const intArg =
  (name: string, min: number, max: number) =>
  (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`${name} must be a whole number from ${min} to ${max}`);
    }
    return Number(value);
  };

/** A commander parser from a function that throws a one-line message on bad input. */
export function parsedBy<T>(parse: (raw: string) => T): (raw: string) => T {
  return (raw) => {
    try {
      return parse(raw);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

/**
 * A usage or configuration problem: the command stops at start with this one-line message and
 * exit code 2. The message names the variable or flag and says what to do; it never carries a
 * secret value.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'CONFIG_INVALID';
  constructor(
    message: string,
    /** The environment variable or flag at fault. */
    readonly variable: string,
  ) {
    super(message);
  }
}

/** A failure the user can act on: one line, and the exit code (1 runtime, 2 usage, 3 a release older than the database). */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2 | 3,
  ) {
    super(message);
  }
}

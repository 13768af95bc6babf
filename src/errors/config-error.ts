/**
 * An invalid option, flag or environment variable: the message is one line
 * naming the field (`policy.capMs: must be ≥ baseMs`).
 */
export class ConfigError extends Error {
  override name = 'ConfigError';

  constructor(message: string, options: { cause?: unknown } = {}) {
    // Only pass `cause` when given, so `'cause' in err` stays false otherwise.
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
  }
}

/**
 * Whether `err` is a {@link ConfigError}: by `instanceof`, or by `name` for
 * one that crossed a process or module boundary and lost its prototype.
 * Never throws.
 */
export function isConfigError(err: unknown): err is Pick<ConfigError, 'name' | 'message'> {
  try {
    return (
      err instanceof ConfigError ||
      (typeof err === 'object' &&
        err !== null &&
        (err as { name?: unknown }).name === 'ConfigError')
    );
  } catch {
    // A revoked Proxy or a throwing `name` getter is not one of ours.
    return false;
  }
}

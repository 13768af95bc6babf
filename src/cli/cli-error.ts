import { jsonDeeperThan } from '../policy/json-depth.js';
import { limits } from '../policy/limits.js';

/**
 * The CLI's exit codes, one table for every command (docs/CLI.md, "Exit
 * codes"): `ok` when the command did its work, `findings` when it did and
 * found something to fix (`requeue doctor`), `failed` when it could not: a
 * usage error, an unknown queue, Redis unreachable or refusing.
 */
export const exitCodes = { ok: 0, findings: 1, failed: 2 } as const;

/**
 * A usage error: bad flag, bad JSON, invalid option. The CLI prints its
 * message on one line and exits with code 2, never a stack trace.
 */
export class CliUsageError extends Error {
  override name = 'CliUsageError';
}

/**
 * Parses a JSON flag value, naming the flag when it is not JSON or nests
 * deeper than the intake allows (a deep value would overflow the stack of
 * whatever serializes it next).
 */
export function parseJsonFlag(flag: string, value: string): unknown {
  if (jsonDeeperThan(value, limits.bodyDepth))
    throw new CliUsageError(`${flag}: nested deeper than ${limits.bodyDepth} levels`);
  try {
    return JSON.parse(value);
  } catch (err) {
    throw new CliUsageError(`${flag}: not valid JSON (${(err as Error).message})`);
  }
}

/**
 * Parses a number flag, naming the flag when it is not a finite number or
 * falls outside `[min, max]` (every number flag has an upper bound).
 */
export function parseNumberFlag(
  flag: string,
  value: string,
  { integer = false, min = -Infinity, max = Number.MAX_SAFE_INTEGER } = {},
): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n))
    throw new CliUsageError(`${flag}: expected a number, got "${value}"`);
  if (integer && !Number.isInteger(n))
    throw new CliUsageError(`${flag}: expected an integer, got "${value}"`);
  if (n < min) throw new CliUsageError(`${flag}: must be ≥ ${min}, got ${value}`);
  if (n > max) throw new CliUsageError(`${flag}: must be ≤ ${max}, got ${value}`);
  return n;
}

/** Parses a time flag: an ISO 8601 date or milliseconds since the epoch, naming the flag. */
export function parseTimeFlag(flag: string, value: string): number {
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms))
    throw new CliUsageError(`${flag}: expected an ISO date or milliseconds, got "${value}"`);
  return ms;
}

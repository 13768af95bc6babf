import type { z } from 'zod';
import { ConfigError } from '../errors/config-error.js';

/**
 * Parses `input` with `schema` and turns a zod failure into one line per
 * issue, each naming the field: `policy.capMs: must be ≥ baseMs`.
 */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  input: unknown,
  label: string,
): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ConfigError(formatZodError(result.error, label));
}

/** Formats a zod error as `label.field: message; …`. */
export function formatZodError(error: z.ZodError, label: string): string {
  return error.issues
    .map((issue) => {
      const path = [label, ...issue.path.map(String)].filter((p) => p !== '').join('.');
      if (issue.code === 'unrecognized_keys') {
        return `${path}: unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
      }
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}

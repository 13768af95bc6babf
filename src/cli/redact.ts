/** Keys whose values the CLI never prints: webhook secrets, tokens, passwords. */
const secretKey = /secret|password|passwd|token|authorization|api[-_]?key/i;

/**
 * A copy of `value` with the values of secret-looking keys replaced, for
 * printing dead jobs (their data may hold a webhook endpoint's secret).
 */
export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, secretKey.test(k) ? '[redacted]' : redactSecrets(v)]),
  );
}

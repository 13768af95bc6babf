/**
 * Standard Webhooks symmetric secrets (`whsec_` + base64): their format,
 * checked with reasons that never quote the secret. Pure, so endpoint
 * records (`endpoint-record.ts`) and the signer share one check.
 *
 * @see https://www.standardwebhooks.com/ (spec 1.0.0, "Signature scheme")
 */

/** The prefix that marks a Standard Webhooks symmetric secret. */
export const secretPrefix = 'whsec_';

/** The spec's bounds on a decoded symmetric secret, in bytes. */
export const secretBytes = { min: 24, max: 64 } as const;

/** Strict base64 (standard alphabet); padding may be left off. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/**
 * The HMAC key of a secret: the base64 after an optional `whsec_` prefix
 * (receivers' libraries accept it either way). Throws a `TypeError` whose
 * message never contains the secret.
 */
export function decodeSecret(secret: string): Buffer {
  const encoded = secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : secret;
  if (encoded === '' || !BASE64.test(encoded)) {
    throw new TypeError(`a webhook secret must be ${secretPrefix} followed by base64`);
  }
  return Buffer.from(encoded, 'base64');
}

/**
 * Why `secret` is not a Standard Webhooks secret a sender should use
 * (`whsec_` + base64 of 24 to 64 bytes), or `undefined` when it is one.
 * The reason never quotes the secret.
 */
export function secretProblem(secret: string): string | undefined {
  if (!secret.startsWith(secretPrefix)) return `must start with "${secretPrefix}"`;
  let key: Buffer;
  try {
    key = decodeSecret(secret);
  } catch {
    return `must be "${secretPrefix}" followed by base64`;
  }
  if (key.length < secretBytes.min || key.length > secretBytes.max) {
    return `must decode to ${secretBytes.min}–${secretBytes.max} bytes, got ${key.length}`;
  }
  return undefined;
}

import {
  classifyError,
  parseClassifyOptions,
  type ClassifyOptionsInput,
} from '../../src/policy/classify/index.js';

/**
 * Shared by the classifier's tests: classify with options over the defaults at
 * a fixed time, errors shaped as clients throw them, and a hostile value.
 */

/** The reference time every case is measured from: 2026-01-01T00:00:00Z. */
const NOW = Date.UTC(2026, 0, 1);

/** Classifies with the defaults overridden by `options`. */
export function classify(err: unknown, options: ClassifyOptionsInput = {}) {
  return classifyError(err, parseClassifyOptions(options), NOW);
}

/** An Error carrying extra fields, as HTTP clients and Node's net throw them. */
export function errorWith(fields: Record<string, unknown>, message = 'failed'): Error {
  return Object.assign(new Error(message), fields);
}

/** A revoked Proxy: every read of it throws. */
export function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

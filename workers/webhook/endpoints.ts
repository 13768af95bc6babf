/**
 * Registering endpoints from the library, the CLI and the admin API: the
 * registry's writes with the SSRF guard applied at create (and update) time,
 * besides the guard every delivery meets at connect time.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../../src/errors/config-error.js';
import { parseConfig } from '../../src/util/parse-config.js';
import type { EndpointRecord, EndpointUpdate } from '../../src/policy/endpoint-record.js';
import { endpointUrlSchema, type EndpointFieldsInput } from '../../src/policy/endpoint-record.js';
import type { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
import { createSsrfGuard, type Resolver, type SsrfOptions } from './ssrf.js';

/** Options of {@link createEndpoint} and {@link updateEndpoint}: the SSRF guard's. */
export interface EndpointWriteOptions extends SsrfOptions {
  /** The resolver the guard asks; `dns.lookup` unless given. */
  resolve?: Resolver;
}

/**
 * Refuses a URL whose host is, or resolves only to, an address the guard
 * blocks (private, loopback, metadata) — with one line naming
 * `endpoint.url`. A host that does not resolve is refused too: a typo is
 * better caught now than after a day of retries.
 */
export async function checkEndpointUrl(url: string, options: EndpointWriteOptions): Promise<void> {
  const parsed = new URL(parseConfig(endpointUrlSchema, url, 'endpoint.url'));
  const guard = createSsrfGuard(options, options.resolve);
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) {
    const refusal = guard.refusal(host, host);
    if (refusal !== undefined) throw new ConfigError(`endpoint.url: ${refusal}`);
    return;
  }
  await new Promise<void>((resolve, reject) => {
    guard.lookup(host, { all: true }, (err) => {
      if (!err) resolve();
      else
        reject(
          new ConfigError(
            `endpoint.url: ${
              (err as { code?: string }).code === 'ERR_DESTINATION_REFUSED'
                ? err.message
                : `cannot resolve ${host} (${(err as { code?: string }).code ?? err.message})`
            }`,
          ),
        );
    });
  });
}

/** Registers an endpoint after checking its URL against the SSRF guard. */
export async function createEndpoint(
  registry: EndpointRegistry,
  queue: string,
  id: string,
  fields: EndpointFieldsInput,
  options: EndpointWriteOptions = {},
): Promise<EndpointRecord> {
  if (typeof fields?.url === 'string') await checkEndpointUrl(fields.url, options);
  return registry.create(queue, id, fields);
}

/** Changes an endpoint; a new URL meets the SSRF guard first. */
export async function updateEndpoint(
  registry: EndpointRegistry,
  queue: string,
  id: string,
  update: EndpointUpdate,
  options: EndpointWriteOptions = {},
): Promise<EndpointRecord> {
  if (typeof update?.url === 'string') await checkEndpointUrl(update.url, options);
  return registry.update(queue, id, update);
}

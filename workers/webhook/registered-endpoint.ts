/**
 * What a delivery to a registered endpoint uses: the record as it is now
 * (URL, secrets, headers, rate limit), not as it was when the message was
 * sent — a rotated secret or a moved URL applies to deliveries already
 * waiting.
 */
import { PermanentError } from '../../src/errors/permanent-error.js';
import { rateBurst, type EndpointRecord } from '../../src/policy/endpoint-record.js';
import type { RateLimit } from '../../src/redis/rate-store.js';
import type { WebhookDelivery } from './delivery-types.js';

/** A webhook job's endpoint part, as far as this module reads it. */
interface JobEndpoint {
  id: string;
  registered?: true | undefined;
  rateLimit?: { perSecond: number; burst?: number | undefined } | undefined;
}

/**
 * The delivery to make: the job's own for an endpoint that is not
 * registered; the record's URL, secrets and headers for one that is.
 * @throws PermanentError (`endpoint-disabled`) for a job fanned out to an
 *   endpoint deleted since: nobody wants it any more.
 */
export function currentDelivery<J extends WebhookDelivery & { endpoint: JobEndpoint }>(
  queue: string,
  job: J,
  record: EndpointRecord | undefined,
): J {
  if (record === undefined) {
    if (!job.endpoint.registered) return job;
    throw new PermanentError(
      `endpoint "${job.endpoint.id}" was deleted from ${queue} after the message was sent`,
      { deadReason: 'endpoint-disabled' },
    );
  }
  return {
    ...job,
    endpoint: {
      ...job.endpoint,
      url: record.url,
      secret: record.secrets,
    },
    headers: { ...job.headers, ...record.headers },
  };
}

/** The rate limit a delivery answers to: its registered endpoint's, else its job's, else none. */
export function endpointRateLimit(
  job: { endpoint: JobEndpoint },
  record: EndpointRecord | undefined,
): RateLimit | undefined {
  const limit = record?.rateLimit ?? job.endpoint.rateLimit;
  return limit === undefined ? undefined : { perSecond: limit.perSecond, burst: rateBurst(limit) };
}

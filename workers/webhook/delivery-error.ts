import type { DeliveryDetails } from './delivery-types.js';

/**
 * A delivery that failed: a non-2xx answer (with `status` and the
 * `retry-after` header, which the classifier reads), a timeout or a network
 * error (with `code`). Messages name the endpoint by origin only: a URL's
 * path and query often carry a token.
 */
export class WebhookDeliveryError extends Error {
  override name = 'WebhookDeliveryError';
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly code?: string;
  readonly latencyMs: number;
  readonly body?: string;

  constructor(
    message: string,
    details: DeliveryDetails & { headers?: Record<string, string>; cause?: unknown },
  ) {
    super(message, 'cause' in details ? { cause: details.cause } : undefined);
    this.latencyMs = details.latencyMs;
    if (details.status !== undefined) this.status = details.status;
    if (details.headers !== undefined) this.headers = details.headers;
    if (details.code !== undefined) this.code = details.code;
    if (details.body !== undefined) this.body = details.body;
  }
}

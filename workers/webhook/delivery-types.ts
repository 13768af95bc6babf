/** What a webhook delivery takes and gives: the job's part, one attempt's details, a success. */
import type { WebhookSecret } from './signature.js';

/** What a delivery needs from a webhook job (see `webhookJobSchema` in `webhook-worker.ts`). */
export interface WebhookDelivery {
  endpoint: {
    id: string;
    /** An `http:` or `https:` URL. */
    url: string;
    /** Signs the request; several sign it during a rotation; none sends it unsigned. */
    secret?: WebhookSecret | undefined;
    /** A CA (PEM) the endpoint's certificate may also chain to: for testing. */
    ca?: string | undefined;
  };
  event: {
    /** Sent as `webhook-id`: the receiver's idempotency key, the same on every attempt. */
    id: string;
    /** `type` of the body, e.g. `invoice.paid`. */
    type: string;
    /** When the event happened, ISO 8601; the attempt's time when absent. */
    timestamp?: string | undefined;
    /** `data` of the body. */
    payload: unknown;
  };
  /** Extra request headers. They never replace `webhook-*`, `content-type` or framing headers. */
  headers?: Readonly<Record<string, string>> | undefined;
}

/** What one attempt saw, for the job's history (`job.annotate`). */
export interface DeliveryDetails {
  /** The response status, when a response came. */
  status?: number;
  /** From the start of the attempt to the end of the (bounded) response body, in ms. */
  latencyMs: number;
  /** The first `maxBodyBytes` of the response body, as UTF-8 (secret and signatures blanked). */
  body?: string;
  /** The error code when no response came (`ETIMEDOUT`, `ECONNREFUSED`, …). */
  code?: string;
}

/** A successful (2xx) delivery. */
export interface DeliveryResult {
  status: number;
  latencyMs: number;
  body: string;
}

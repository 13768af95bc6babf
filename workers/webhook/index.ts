/**
 * Webhook delivery on requeue: Standard Webhooks signatures, an SSRF guard,
 * the delivery attempt and the worker that retries and dead-letters it.
 * `main.ts` is the runnable process and is not re-exported.
 *
 * @module requeue/webhook
 */
export {
  decodeSecret,
  secretBytes,
  secretPrefix,
  secretProblem,
  signatureHeader,
  signWebhook,
  verifyWebhook,
  webhookHeaders,
  WebhookVerificationError,
} from './signature.js';
export type { ReceivedHeaders, SignedHeaders, VerifyOptions, WebhookSecret } from './signature.js';
export { blockedRange, createSsrfGuard, destinationRefusedCode } from './ssrf.js';
export type { BlockedRange, Resolver, SsrfGuard, SsrfOptions } from './ssrf.js';
export { defaultUserAgent, deliverWebhook, WebhookDeliveryError, webhookBody } from './deliver.js';
export type {
  DeliverOptions,
  DeliveryDetails,
  DeliveryResult,
  WebhookDelivery,
} from './deliver.js';
export {
  createWebhookWorker,
  webhookAdaptiveDefaults,
  webhookBreakerDefaults,
  webhookWorkerDefaults,
  enqueueWebhook,
  WebhookWorker,
  webhookJobKey,
  webhookJobSchema,
} from './webhook-worker.js';
export type {
  EnqueueWebhookOptions,
  WebhookJob,
  WebhookJobInput,
  WebhookWorkerOptions,
} from './webhook-worker.js';
export { EndpointStore } from '../../src/redis/endpoint-store.js';
export type { DisabledEndpoint, EndpointStoreOptions } from '../../src/redis/endpoint-store.js';
export { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
export type { EndpointRegistryOptions } from '../../src/redis/endpoint-registry.js';
export {
  EndpointRegistryError,
  isEndpointRegistryError,
} from '../../src/errors/endpoint-registry-error.js';
export {
  endpointFieldsSchema,
  endpointView,
  subscribes,
} from '../../src/policy/endpoint-record.js';
export type {
  EndpointFieldsInput,
  EndpointRecord,
  EndpointUpdate,
} from '../../src/policy/endpoint-record.js';
export { checkEndpointUrl, createEndpoint, updateEndpoint } from './endpoints.js';
export type { EndpointWriteOptions } from './endpoints.js';
export { defaultMaxPayloadBytes, messageSchema, sendMessage } from './messages.js';
export type { MessageInput, SendMessageOptions, SentMessage } from './messages.js';
export { webhookRetryPolicy } from '../../src/policy/webhook-policy.js';
export {
  defaultRecoverRatePerSec,
  defaultRecoverWeight,
  maxResends,
  recoverEndpoint,
  recoverLane,
  resendMessage,
} from './recovery.js';
export type { RecoverOptions, RecoverResult, Resent, ResendOptions } from './recovery.js';
export { resendJobKey } from './webhook-job.js';
export { ResendError, isResendError } from '../../src/errors/resend-error.js';
export type { ResendErrorCode } from '../../src/errors/resend-error.js';
export type { EndpointRegistryErrorCode } from '../../src/errors/endpoint-registry-error.js';

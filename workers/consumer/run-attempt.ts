import type { z } from 'zod';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { captureBrokerError, type BrokerError } from './broker-error.js';
import {
  brokerRetryJob,
  messageFromRead,
  prepareBody,
  type BrokerHandler,
  type ReadMessage,
} from './broker-message.js';

/** What the broker attempt of one message came to. */
export type BrokerAttemptOutcome =
  | { kind: 'success' }
  | { kind: 'failed'; error: BrokerError; job: ReturnType<typeof brokerRetryJob> };

/**
 * Runs attempt 1 of a message as a broker consumer does: a message
 * delivered more than `maxDeliveries` times (its consumers kept dying on
 * it), over `maxBodyBytes`, or not valid for `schema` fails without running
 * the handler; else the handler runs. A failure comes with its hand-off job.
 * Never throws.
 */
export function runBrokerAttempt<B>(input: {
  read: ReadMessage;
  handler: BrokerHandler<B>;
  schema: z.ZodType<B> | undefined;
  maxBodyBytes: number;
  maxDeliveries: number;
  consumer: string;
  policy: RetryPolicyInput | undefined;
  signal: AbortSignal;
  now: () => number;
  /** The attempt number the handler sees. @defaultValue `1` (JetStream `nak` mode: the delivery count) */
  attempt?: number;
}): Promise<BrokerAttemptOutcome> {
  const { read, maxDeliveries } = input;
  if (read.deliveries > maxDeliveries) {
    return Promise.resolve(
      failed(input, {
        class: 'BrokerDeliveryError',
        message: `delivered ${read.deliveries} times without being acknowledged (maxDeliveries ${maxDeliveries})`,
      }),
    );
  }
  const prepared = prepareBody(read, { maxBodyBytes: input.maxBodyBytes, schema: input.schema });
  if (!prepared.ok) return Promise.resolve(failed(input, prepared.error));
  // One promise and one reaction per healthy message: no async wrappers around the handler.
  let running: Promise<void>;
  try {
    running = Promise.resolve(
      input.handler(
        messageFromRead(
          read,
          prepared.body,
          input.signal,
          input.attempt ?? read.republished?.attempt ?? 1,
        ),
      ),
    );
  } catch (err) {
    return Promise.resolve(failed(input, captureBrokerError(err)));
  }
  return running.then(
    () => succeeded,
    (err: unknown) => failed(input, captureBrokerError(err)),
  );
}

const succeeded: BrokerAttemptOutcome = Object.freeze({ kind: 'success' });

function failed(
  input: {
    read: ReadMessage;
    maxBodyBytes: number;
    consumer: string;
    policy: RetryPolicyInput | undefined;
    now: () => number;
  },
  error: BrokerError,
): BrokerAttemptOutcome {
  const { read, maxBodyBytes } = input;
  const job = brokerRetryJob({
    read,
    maxBodyBytes,
    policy: input.policy,
    attempt: {
      consumer: input.consumer,
      deliveries: read.deliveries,
      failedAt: input.now(),
      error,
    },
  });
  return { kind: 'failed', error, job };
}

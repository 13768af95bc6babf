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
export async function runBrokerAttempt<B>(input: {
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
  const { read, maxBodyBytes } = input;
  const error = await attempt(input);
  if (error === undefined) return { kind: 'success' };
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

async function attempt<B>(
  input: Parameters<typeof runBrokerAttempt<B>>[0],
): Promise<BrokerError | undefined> {
  const { read, maxDeliveries } = input;
  if (read.deliveries > maxDeliveries) {
    return {
      class: 'BrokerDeliveryError',
      message: `delivered ${read.deliveries} times without being acknowledged (maxDeliveries ${maxDeliveries})`,
    };
  }
  const prepared = prepareBody(read, { maxBodyBytes: input.maxBodyBytes, schema: input.schema });
  if (!prepared.ok) return prepared.error;
  try {
    await input.handler(messageFromRead(read, prepared.body, input.signal, input.attempt ?? 1));
    return undefined;
  } catch (err) {
    return captureBrokerError(err);
  }
}

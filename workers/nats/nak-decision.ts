import { analyse } from '../../src/policy/classify/analyse.js';
import { defaultClassifyOptions } from '../../src/policy/classify/classify.js';
import { decideFailure, type FailureDecision } from '../../src/policy/decide.js';
import type { RetryPolicy } from '../../src/policy/retry-policy.js';
import type { Random } from '../../src/util/system.js';
import { reviveBrokerError, type BrokerError } from '../consumer/broker-error.js';

/**
 * `nak` mode's decision for a failed delivery: requeue's decision tree with
 * the delivery count as the attempts made and the message's stream time as
 * the first failure (JetStream keeps no earlier one). A JetStream consumer's
 * `max_deliver` caps the attempts too, so the last allowed delivery is
 * dead-lettered here rather than dropped by JetStream unseen.
 */
export function decideNak(input: {
  error: BrokerError;
  deliveries: number;
  publishedAt: number;
  maxDeliver: number;
  policy: RetryPolicy;
  now: number;
  random: Random;
}): FailureDecision {
  const { error, deliveries, publishedAt, maxDeliver, policy, now, random } = input;
  const { classification, deadReason } = analyse(
    reviveBrokerError(error),
    defaultClassifyOptions,
    now,
  );
  const decision = decideFailure({
    classification,
    policy,
    attemptsMade: deliveries,
    firstFailedAt: Math.min(publishedAt, now),
    now,
    random,
    deadReason,
  });
  if (decision.kind === 'retry' && maxDeliver > 0 && deliveries >= maxDeliver)
    return { kind: 'dead-letter', reason: 'max-attempts' };
  return decision;
}

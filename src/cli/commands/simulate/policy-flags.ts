import { retryPolicySchema, type RetryPolicy } from '../../../policy/retry-policy.js';
import { CliUsageError } from '../../cli-error.js';
import { describeIssues } from '../plan.js';
import { optionalNumberFlag } from './flags.js';

const workersDefaults = retryPolicySchema.parse({});

/** The clients' backoff flags, their shown defaults those of `defaults` then the workers'. */
export function policyFlags(defaults: Partial<RetryPolicy>) {
  const shown = { ...workersDefaults, ...defaults };
  return {
    baseMs: optionalNumberFlag('first delay', shown.baseMs),
    capMs: optionalNumberFlag('longest delay', shown.capMs),
    factor: optionalNumberFlag('growth per retry', shown.factor),
    jitter: optionalNumberFlag('normal-jitter deviation as a fraction of the delay', shown.jitter),
    randomMs: optionalNumberFlag('google: width of the random term', shown.randomMs),
  };
}

const policyFields = ['baseMs', 'capMs', 'factor', 'jitter', 'randomMs'] as const;

/** The fields {@link policyFlags} parsed: undefined when not given. */
export interface PolicyFlagValues {
  baseMs: number | undefined;
  capMs: number | undefined;
  factor: number | undefined;
  jitter: number | undefined;
  randomMs: number | undefined;
}

/** The clients' backoff options, validated by the workers' own schema so errors name the flag. */
export function policyFrom(values: PolicyFlagValues, defaults: Partial<RetryPolicy>): RetryPolicy {
  const input: Record<string, unknown> = { ...defaults };
  for (const field of policyFields) if (values[field] !== undefined) input[field] = values[field];
  const result = retryPolicySchema.safeParse(input);
  if (!result.success) throw new CliUsageError(describeIssues(result.error));
  return result.data;
}

/** The backoff options a report prints. */
export function policyParams(policy: RetryPolicy) {
  const { baseMs, capMs, factor, jitter, randomMs } = policy;
  return { baseMs, capMs, factor, jitter, randomMs };
}

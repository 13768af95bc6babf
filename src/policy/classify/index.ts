/** Error classification: is a failure worth retrying, and when. */
export {
  classifyError,
  classifyOptionsSchema,
  defaultClassifyOptions,
  parseClassifyOptions,
} from './classify.js';
export type {
  Classification,
  ClassifyOptions,
  ClassifyOptionsInput,
  PermanentClassification,
  PermanentReason,
  RetryClassification,
  RetryPredicate,
  RetryReason,
} from './classify.js';
export { describeError } from './describe-error.js';
export type { ErrorDescription } from './describe-error.js';
export { parseRetryAfter, readRetryAfterHeader } from './retry-after.js';

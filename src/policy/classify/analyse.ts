/** A thrown value read for the failure decision: its description, classification and dead reason. */
import { describeError } from './describe-error.js';
import { classifyError, type Classification, type ClassifyOptions } from './classify.js';
import { deadReasonOf } from '../../errors/permanent-error.js';

/** A failure as the decision needs it; never throws, whatever was thrown. */
export function analyse(
  err: unknown,
  options: ClassifyOptions,
  now: number,
): {
  classification: Classification;
  error: ReturnType<typeof describeError>;
  deadReason: ReturnType<typeof deadReasonOf>;
} {
  let error: ReturnType<typeof describeError>;
  try {
    error = describeError(err);
  } catch {
    error = { class: 'Unknown', message: 'a thrown value that could not be read' };
  }
  let classification: Classification;
  try {
    classification = classifyError(err, options, now);
  } catch {
    // What the classifier could not read, it treats like any unknown error.
    classification = classifyError(new Error(error.message), options, now);
  }
  let deadReason: ReturnType<typeof deadReasonOf>;
  try {
    deadReason = deadReasonOf(err);
  } catch {
    deadReason = undefined;
  }
  return { classification, error, deadReason };
}

/** Why a job was dead-lettered; stored with the dead job and used as a filter. */
export const deadReasons = [
  'permanent-error',
  'gone',
  'max-attempts',
  'max-elapsed',
  'invalid-payload',
  'budget-exhausted',
  'endpoint-disabled',
  'max-deferrals',
  /** A flow's child died and its `failParentOnFailure` fails this parent (BullMQ's deferred failure). */
  'child-failed',
] as const;
export type DeadReason = (typeof deadReasons)[number];

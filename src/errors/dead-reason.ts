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
] as const;
export type DeadReason = (typeof deadReasons)[number];

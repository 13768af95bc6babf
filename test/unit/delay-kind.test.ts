import { describe, expect, it } from 'vitest';
import { delayKind, emptyJobState, type AttemptRecord } from '../../src/policy/job-state.js';

const attempt = (decision: AttemptRecord['decision'], replay?: number): AttemptRecord => ({
  attempt: 1,
  startedAt: 0,
  outcome: decision === 'deferred' ? 'deferred' : 'failed',
  decision,
  ...(replay !== undefined ? { replay } : {}),
});

describe('delayKind', () => {
  it('tells a retry from a deferral and from a job added with a delay', () => {
    expect(delayKind(undefined, 0)).toBe('scheduled');
    expect(delayKind(emptyJobState(), 0)).toBe('scheduled');
    expect(delayKind({ ...emptyJobState(), history: [attempt('retry')] }, 0)).toBe('retry');
    expect(
      delayKind({ ...emptyJobState(), history: [attempt('retry'), attempt('deferred')] }, 0),
    ).toBe('deferral');
  });

  it('does not read an earlier life as this one: a replayed job added again with a delay is scheduled', () => {
    const state = { ...emptyJobState(1), history: [attempt('retry', 0)] };
    expect(delayKind(state, 1)).toBe('scheduled');
    expect(delayKind({ ...state, history: [attempt('retry', 1)] }, 1)).toBe('retry');
  });
});

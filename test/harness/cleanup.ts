import { afterEach } from 'vitest';

type Step = () => Promise<unknown> | unknown;

const steps: Step[] = [];

// Last registered, first run: workers close before their queue, a queue's keys go last.
afterEach(async () => {
  while (steps.length > 0) {
    const step = steps.pop()!;
    try {
      await step();
    } catch (err) {
      console.warn('cleanup failed:', err);
    }
  }
});

/** Runs `step` after the current test, in reverse order of registration. */
export function onCleanup(step: Step): void {
  steps.push(step);
}

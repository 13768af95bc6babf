import { describe, expect, it, vi } from 'vitest';
import { startedByNpm, watchParent } from '../../src/util/parent-watch.js';

describe('watchParent', () => {
  it('resolves once the parent pid changes (the orphan was re-parented)', async () => {
    const reads = [41, 41, 41, 1];
    const watch = watchParent({ pollMs: 1, first: 41, ppid: () => reads.shift() ?? 1 });
    await watch.gone;
    expect(reads).toEqual([]);
  });

  it('resolves when the parent had already gone before the watch began', async () => {
    await watchParent({ pollMs: 1, first: 41, ppid: () => 1 }).gone;
  });

  it('stays pending while the parent lives, and stop ends the polling', async () => {
    vi.useFakeTimers();
    try {
      let reads = 0;
      let gone = false;
      const watch = watchParent({ pollMs: 5, first: 41, ppid: () => (reads++, 41) });
      void watch.gone.then(() => (gone = true));
      await vi.advanceTimersByTimeAsync(100);
      expect(gone).toBe(false);
      expect(reads).toBe(20);
      watch.stop();
      await vi.advanceTimersByTimeAsync(100);
      expect(reads).toBe(20);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('startedByNpm', () => {
  it('is true under npx (npm_command) or an npm script (npm_lifecycle_event), false otherwise', () => {
    expect(startedByNpm({ npm_command: 'exec' })).toBe(true);
    expect(startedByNpm({ npm_lifecycle_event: 'start' })).toBe(true);
    expect(startedByNpm({})).toBe(false);
  });
});

import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import { cleanedQueueName, connect } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import { watchTransitions } from './breaker-helpers.js';

/**
 * The breaker's Redis scripts under concurrent callers: one transition per trip,
 * isolation published, never more probes than halfOpenProbes.
 */

connectForFile();

describe('the breaker in Redis under concurrency', () => {
  async function connections(count: number): Promise<Redis[]> {
    const conns = Array.from({ length: count }, () => connect());
    onCleanup(() => conns.forEach((c) => c.disconnect()));
    await Promise.all(conns.map((c) => c.ping()));
    return conns;
  }

  it('simultaneous trips make one transition', async () => {
    const name = cleanedQueueName(redis, 'brk-cas');
    const options = parseBreakerOptions({ failureRate: 0.5, minimumRequests: 10 });
    const watch = await watchTransitions(name);
    const conns = await connections(20);
    for (const key of ['k1', 'k2', 'k3']) {
      const now = Date.now();
      // Each batch alone fills the window with failures: every caller would trip it.
      const results = await Promise.all(
        conns.map((c) =>
          new BreakerStore(c, name, options).record(
            key,
            { successes: 0, failures: 10, trailingFailures: 10 },
            now,
          ),
        ),
      );
      await watch.sync();
      expect(results.filter((m) => m !== undefined)).toHaveLength(1);
      expect(watch.transitions(key)).toEqual(['opened']);
      const store = new BreakerStore(redis, name, options);
      const { state, version } = await store.read(key);
      expect(state).toMatchObject({ phase: 'open', trips: 1, openedAt: now });
      expect(version).toBe(1);
      expect((await store.status(key, now)).window.total).toBe(200);
    }
  });

  it('isolating a tripped breaker is published, so that workers learn at once', async () => {
    const name = cleanedQueueName(redis, 'brk-isolate');
    const options = parseBreakerOptions({ minimumRequests: 1 });
    const watch = await watchTransitions(name);
    const store = new BreakerStore(redis, name, options);
    const now = Date.now();
    await store.record('k', { successes: 0, failures: 1, trailingFailures: 1 }, now);
    const message = await store.forceOpen('k', now + 10);
    await watch.sync();
    expect((await store.read('k')).state).toMatchObject({ phase: 'isolated' });
    // Without a message the workers keep the old halfOpenAt until their next reload.
    expect(message?.state.phase).toBe('isolated');
    expect(watch.seen.filter((m) => m.key === 'k').map((m) => m.state.phase)).toEqual([
      'open',
      'isolated',
    ]);
  });

  it('never admits more than halfOpenProbes probes, however many ask at once', async () => {
    const name = cleanedQueueName(redis, 'brk-admit');
    const options = parseBreakerOptions({
      halfOpenProbes: 3,
      minimumRequests: 1,
      openMs: 1_000,
      probeTimeoutMs: 5_000,
    });
    const watch = await watchTransitions(name);
    const conns = await connections(50);
    const key = 'endpoint-1';
    const trippedAt = Date.now();
    await new BreakerStore(redis, name, options).record(
      key,
      { successes: 0, failures: 1, trailingFailures: 1 },
      trippedAt,
    );
    const ask = async (round: string, now: number) => {
      const answers = await Promise.all(
        conns.map((c, i) => new BreakerStore(c, name, options).admit(key, `${round}-${i}`, now)),
      );
      return answers.map((a) => a.admission);
    };

    // Open, past halfOpenAt: 50 at once race for the half-open transition and 3 slots.
    const firstAt = trippedAt + 1_000;
    const first = await ask('a', firstAt);
    const probes = first.filter((a) => a.kind === 'probe');
    expect(probes).toHaveLength(3);
    for (const other of first.filter((a) => a.kind !== 'probe')) {
      expect(other).toEqual({ kind: 'reject', retryAt: firstAt + options.halfOpenRetryMs });
    }
    await watch.sync();
    expect(watch.transitions(key)).toEqual(['opened', 'half-open']);
    const store = new BreakerStore(redis, name, options);
    const { state } = await store.read(key);
    expect(state.phase).toBe('half-open');
    expect(Object.keys(state.probes).sort()).toEqual(
      probes.map((p) => (p.kind === 'probe' ? p.probeId : '')).sort(),
    );

    // Half-open with every lease expired (their workers died): again exactly 3.
    const second = await ask('b', firstAt + options.probeTimeoutMs);
    expect(second.filter((a) => a.kind === 'probe')).toHaveLength(3);
    expect(Object.keys((await store.read(key)).state.probes)).toHaveLength(3);
  });
});

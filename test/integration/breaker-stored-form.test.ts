/**
 * `BreakerState` became one shape per phase, an isolated circuit its own
 * phase: the states earlier versions stored in Redis and published to the
 * workers (an isolated circuit as `open` with `isolated: true`) must still
 * read as what they were, and what is written now must read right in a
 * worker not yet upgraded.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import {
  BreakerStore,
  breakerStatusView,
  type BreakerMessage,
} from '../../src/redis/breaker-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { BreakerGate } from '../../src/scheduler/breaker-gate.js';
import { systemClock } from '../../src/util/system.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect } from '../harness/redis.js';
import { gate as opened } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const redis = connect();
afterAll(() => redis.disconnect());

const options = parseBreakerOptions({ minimumRequests: 1, isolatedRetryMs: 10_000 });
/** An isolated circuit as earlier versions stored and published it. */
const isolatedAsBefore = {
  phase: 'open',
  openedAt: 1_700_000_000_000,
  trips: 1,
  probes: {},
  probeSuccesses: 0,
  isolated: true,
};

describe('breaker states in the form earlier versions wrote', () => {
  it('a state stored in the old form reads as the isolated circuit it was', async () => {
    const name = cleanedQueueName(redis, 'brk-old-stored');
    await redis.hset(requeueKeys(name).breaker('k'), 's', JSON.stringify(isolatedAsBefore), 'v', 1);
    const store = new BreakerStore(redis, name, options);
    const { state, version } = await store.read('k');
    expect(state).toEqual({
      phase: 'isolated',
      openedAt: isolatedAsBefore.openedAt,
      trips: 1,
      probes: {},
      probeSuccesses: 0,
    });
    expect(version).toBe(1);
    // Shown as always: open, marked isolated, no half-open time.
    expect(breakerStatusView(await store.status('k'))).toMatchObject({
      state: 'open',
      isolated: true,
      halfOpenAt: null,
    });
    // Its jobs are turned away until it is closed by hand, whatever the time.
    const now = Date.now();
    const { admission } = await store.admit('k', 'p', now);
    expect(admission).toEqual({ kind: 'reject', retryAt: now + options.isolatedRetryMs });
  });

  it('a transition published in the old form reaches a worker as an isolated circuit', async () => {
    const name = cleanedQueueName(redis, 'brk-old-message');
    const heard = opened<BreakerMessage>();
    const breakers = new BreakerGate({
      redis,
      queue: name,
      breaker: options,
      clock: systemClock,
      logger,
      onTransition: (message) => heard.open(message),
    });
    onCleanup(() => breakers.close());
    await breakers.start();
    await redis.hset(requeueKeys(name).breaker('k'), 's', JSON.stringify(isolatedAsBefore), 'v', 1);
    const old = { key: 'k', transition: 'opened', state: isolatedAsBefore };
    await redis.publish(requeueKeys(name).breakerChannel, JSON.stringify(old));

    expect((await heard.promise).state).toMatchObject({ phase: 'isolated', trips: 1 });
    expect(breakers.stateOf('k')?.phase).toBe('isolated');
    // Turned away by the cached state alone, as an isolated circuit is, until closed by hand.
    const now = Date.now();
    const admission = await breakers.check('k', () => 'p');
    expect(admission.kind).toBe('reject');
    expect((admission as { retryAt: number }).retryAt).toBeGreaterThanOrEqual(
      now + options.isolatedRetryMs,
    );
  });

  it('an isolated circuit is stored and published in the old form, for workers not yet upgraded', async () => {
    const name = cleanedQueueName(redis, 'brk-new-written');
    const subscriber = connect();
    onCleanup(() => subscriber.disconnect());
    const published = opened<string>();
    subscriber.on('message', (_channel: string, raw: string) => published.open(raw));
    await subscriber.subscribe(requeueKeys(name).breakerChannel);
    const store = new BreakerStore(redis, name, options);

    const message = await store.forceOpen('k', 1_700_000_000_000);

    expect(message?.state.phase).toBe('isolated');
    const stored = JSON.parse((await redis.hget(requeueKeys(name).breaker('k'), 's'))!) as unknown;
    const asBefore = { ...isolatedAsBefore, trips: 0 };
    expect(stored).toEqual(asBefore);
    const sent = JSON.parse(await published.promise) as { state: unknown };
    expect(sent.state).toEqual(asBefore);
  });
});

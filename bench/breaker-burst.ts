/**
 * The burst: worker processes against a dependency that fails every call
 * from the first, counting the calls it receives before the shared breaker
 * opens and until the fleet has stopped. The bound: `minimumRequests` plus
 * the attempts already in flight (the fleet's concurrency).
 */
import type { Redis } from 'ioredis';
import { createQueue } from '../src/scheduler/queue.js';
import { requeueKeys } from '../src/redis/keys.js';
import { createRedis } from '../src/redis/connection.js';
import { startDependency } from '../test/fixtures/breaker-dependency.js';
import type { startFleet as StartFleet } from '../test/fixtures/breaker-fleet.js';

/** What one burst run saw. */
export interface BurstSample {
  /** Calls that started before the state's `openedAt`. */
  beforeOpen: number;
  /** Every call the dependency received up to 2 s after the opening. */
  total: number;
  /** `minimumRequests` + the fleet's concurrency. */
  bound: number;
}

export interface BurstOptions {
  redisUrl: string;
  queueName: string;
  workers: number;
  concurrency: number;
  minimumRequests: number;
  jobs: number;
  /** The checkout whose fixture workers run (another commit's, for a reference). @defaultValue this one */
  root?: string;
}

/** One run: a fresh fleet, a failing dependency, `jobs` jobs added at once. */
export async function measureBurst(options: BurstOptions): Promise<BurstSample> {
  const dep = await startDependency();
  dep.fail();
  const admin: Redis = createRedis(options.redisUrl);
  const queue = createQueue<{ i: number }>(options.queueName, { connection: options.redisUrl });
  const root = options.root ?? process.cwd();
  // The fixture spawns its worker from its own checkout: the reference's code runs the reference.
  const { startFleet } = (await import(`${root}/test/fixtures/breaker-fleet.ts`)) as {
    startFleet: typeof StartFleet;
  };
  const fleet = await startFleet(options.workers, {
    REDIS_URL: options.redisUrl,
    QUEUE: options.queueName,
    DEPENDENCY_URL: dep.url,
    BREAKER: JSON.stringify({ minimumRequests: options.minimumRequests }),
    CONCURRENCY: String(options.concurrency),
  });
  try {
    await queue.addBulk(
      Array.from({ length: options.jobs }, (_, i) => ({ name: 'call', data: { i } })),
    );
    const opened = await Promise.race(
      fleet.map((w) => w.waitForEvent((e) => e.name === 'breaker:opened', 30_000)),
    );
    void opened;
    const raw = await admin.hget(requeueKeys(options.queueName).breaker('__queue__'), 's');
    const openedAt = (JSON.parse(raw ?? '{}') as { openedAt?: number }).openedAt ?? Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    return {
      beforeOpen: dep.calls.filter((c) => c.startedAt < openedAt).length,
      total: dep.count(),
      bound: options.minimumRequests + options.workers * options.concurrency,
    };
  } finally {
    await Promise.all(fleet.map((w) => w.stop()));
    await queue.close();
    await dep.close();
    admin.disconnect();
  }
}

import { Redis } from 'ioredis';
import {
  parseBreakerOptions,
  type BreakerOptionsInput,
} from '../src/policy/breaker/breaker-options.js';
import type { BreakerState } from '../src/policy/breaker/breaker.js';
import { breakerStateView } from '../src/policy/breaker/breaker-state.js';
import { BreakerStore, type BreakerMessage } from '../src/redis/breaker-store.js';
import { requeueKeys } from '../src/redis/keys.js';
import { createQueue } from '../src/scheduler/queue.js';
import { queueBreakerKey } from '../src/scheduler/requeue-worker.js';
import { startDependency } from '../test/fixtures/breaker-dependency.js';
import { askReports, startFleet, type ChildReport } from '../test/fixtures/breaker-fleet.js';

/**
 * The breaker benchmark's second part: how long after a trip the last of a
 * fleet of worker processes starts its last handler call. The workers
 * (`test/fixtures/breaker-worker.ts`) process a steady stream against a
 * healthy dependency; each trip is either forced (`BreakerStore.forceOpen`,
 * as `requeue breaker open` does) or caused by the dependency failing. Each
 * child keeps the time its handler last started and reports it on request
 * through a Redis list; every process reads the same machine clock.
 */

export type TripKind = 'forced' | 'failures';

export interface StopOptions {
  redisUrl: string;
  queueName: string;
  workers: number;
  concurrency: number;
  trips: number;
  kinds: TripKind[];
  log: (line: string) => void;
}

/** One trip: when it happened and when each worker's handler last started a call. */
export interface TripSample {
  kind: TripKind;
  /** The forceOpen call's start, or the tripped state's `openedAt`. */
  tripAt: number;
  /** max(last handler start) − tripAt, never below 0. */
  stopMs: number;
  reports: ChildReport[];
}

/** The children's breaker: a long open time, so that no probe runs while we watch. */
export const stopBreaker: BreakerOptionsInput = {
  failureRate: 0.5,
  minimumRequests: 20,
  consecutiveFailures: 20,
  windowMs: 2_000,
  openMs: 600_000,
  maxOpenMs: 600_000,
};

/** Jobs kept waiting, so that every worker is always busy. */
export const backlog = 2_000;

/** How long after a trip we wait before asking the workers: any straggler shows up as ~this. */
const settleMs = 500;

export async function measureStopping(options: StopOptions): Promise<TripSample[]> {
  const { redisUrl, queueName, log } = options;
  // Each on its own connection: a trip must not queue behind the producer's bulk adds.
  const admin = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const producerConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const reportConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const subscriber = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const dependency = await startDependency();
  const store = new BreakerStore(admin, queueName, parseBreakerOptions(stopBreaker));
  const queue = createQueue<{ i: number }>(queueName, { connection: producerConnection });
  const opened: BreakerState[] = [];
  subscriber.on('message', (_channel: string, raw: string) => {
    const message = JSON.parse(raw) as BreakerMessage;
    if (message.transition === 'opened') opened.push(message.state);
  });
  await subscriber.subscribe(requeueKeys(queueName).breakerChannel);

  const fleet = await startFleet(options.workers, {
    REDIS_URL: redisUrl,
    QUEUE: queueName,
    DEPENDENCY_URL: dependency.url,
    BREAKER: JSON.stringify(stopBreaker),
    POLICY: JSON.stringify({
      strategy: 'full-jitter',
      baseMs: 100,
      capMs: 1_000,
      maxAttempts: 1_000,
    }),
    CONCURRENCY: String(options.concurrency),
  });
  log(`stop: ${fleet.length} worker processes ready (pids ${fleet.map((w) => w.pid).join(', ')})`);

  // A steady stream: keep a backlog so that every worker is always busy. Small
  // batches, so that no single bulk add holds Redis for long.
  let producing = true;
  let next = 0;
  const producer = (async () => {
    while (producing) {
      if ((await queue.bull.getWaitingCount()) < backlog) {
        await queue.addBulk(
          Array.from({ length: 100 }, () => ({ name: 'steady', data: { i: next++ } })),
        );
      } else {
        await sleep(20);
      }
    }
  })();

  const samples: TripSample[] = [];
  try {
    for (let trip = 0; trip < options.trips; trip += 1) {
      for (const kind of options.kinds) {
        await runningAgain(store, dependency, reportConnection, queueName, fleet.length);
        await sleep(200);
        let tripAt: number;
        if (kind === 'forced') {
          tripAt = Date.now();
          await store.forceOpen(queueBreakerKey, tripAt);
        } else {
          const before = opened.length;
          dependency.fail();
          await until(() => opened.length > before, 'the failures to trip the breaker', 10_000);
          tripAt = breakerStateView(opened[opened.length - 1]!).openedAt!;
        }
        await sleep(settleMs);
        const reports = await askReports(reportConnection, queueName, fleet.length);
        const last = Math.max(...reports.map((r) => r.lastStart));
        const sample = { kind, tripAt, stopMs: Math.max(0, last - tripAt), reports };
        samples.push(sample);
        log(
          `stop: ${kind.padEnd(8)} trip ${trip + 1}/${options.trips}: last of ${fleet.length} ` +
            `stopped ${sample.stopMs} ms after the trip (per worker: ${reports
              .map((r) => `${r.worker} ${r.lastStart - tripAt}`)
              .join(', ')} ms)`,
        );
      }
    }
  } finally {
    producing = false;
    await producer.catch(() => undefined);
    await Promise.all(fleet.map((w) => w.stop()));
    await queue.close();
    await dependency.close();
    subscriber.disconnect();
    reportConnection.disconnect();
    producerConnection.disconnect();
    admin.disconnect();
  }
  return samples;
}

/** Closes the breaker, heals the dependency, and waits until every worker is calling again. */
async function runningAgain(
  store: BreakerStore,
  dependency: { heal(): void },
  reportConnection: Redis,
  queueName: string,
  workers: number,
): Promise<void> {
  dependency.heal();
  await store.forceClose(queueBreakerKey);
  const since = Date.now();
  await until(
    async () => {
      const reports = await askReports(reportConnection, queueName, workers);
      return reports.every((r) => r.lastStart > since + 100);
    },
    'every worker to process jobs again',
    20_000,
    50,
  );
}

async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs: number,
  intervalMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await sleep(intervalMs);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

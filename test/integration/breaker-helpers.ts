import { createLogger } from '../../src/config/logger.js';
import type { BreakerOptionsInput } from '../../src/policy/breaker/breaker-options.js';
import type { BreakerState } from '../../src/policy/breaker/breaker.js';
import { toBreakerState } from '../../src/policy/breaker/breaker-state.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { BreakerMessage } from '../../src/redis/breaker-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { parseJobState, type JobState } from '../../src/policy/job-state.js';
import {
  createWorker,
  queueBreakerKey,
  type Handler,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import {
  startDependency,
  type Dependency,
  type DependencyCall,
} from '../fixtures/breaker-dependency.js';
import { startFleet, type ChildWorker } from '../fixtures/breaker-fleet.js';
import { connect, jobKey, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { redis } from '../harness/file-redis.js';

/**
 * Shared by the breaker's integration tests (on the file's connection,
 * test/harness/file-redis.ts): queues, workers and child fleets cleaned up
 * after each test, the dependency they call, and a watcher of the transitions
 * the workers publish.
 */

/**
 * How long after a worker learned of a trip a handler may still start: one
 * that passed the breaker a moment before starts within microseconds.
 */
export const GRACE_MS = 50;

/** Generous enough to outlive every outage below: deferrals consume no attempt. */
export const generousPolicy: RetryPolicyInput = {
  strategy: 'full-jitter',
  baseMs: 100,
  capMs: 1_000,
  maxAttempts: 50,
};

export interface Data {
  i?: number;
  key?: string;
  mode?: 'ok' | 'fail-once' | 'timeout-once';
}

export function queueFor(name: string): RequeueQueue<Data> {
  const queue = createQueue<Data>(name, { connection: redisUrl() });
  onCleanup(() => queue.close());
  return queue;
}

export async function dependency(): Promise<Dependency> {
  const dep = await startDependency();
  onCleanup(() => dep.close());
  return dep;
}

export function startWorker(
  name: string,
  handler: Handler<Data, unknown>,
  options: WorkerOptions<Data>,
): RequeueWorker<Data, unknown> {
  const worker = createWorker<Data, unknown>(name, handler, {
    connection: redisUrl(),
    logger: createLogger({ level: 'silent' }),
    ...options,
  });
  onCleanup(() => worker.close({ timeoutMs: 5_000 }));
  return worker;
}

export async function fleet(
  count: number,
  settings: Parameters<typeof startFleet>[1],
): Promise<ChildWorker[]> {
  const workers = await startFleet(count, settings);
  onCleanup(async () => {
    await Promise.all(workers.map((w) => w.stop()));
  });
  return workers;
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms: ${typeof what === 'string' ? what : what()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface Seen extends BreakerMessage {
  receivedAt: number;
}

export type OpenState = Extract<BreakerState, { phase: 'open' }>;

/** Listens to a queue's breaker channel: every transition any worker publishes. */
export async function watchTransitions(name: string) {
  const channel = requeueKeys(name).breakerChannel;
  const subscriber = connect();
  onCleanup(() => subscriber.disconnect());
  const seen: Seen[] = [];
  const sentinels = new Set<string>();
  subscriber.on('message', (_channel: string, raw: string) => {
    const message = JSON.parse(raw) as BreakerMessage | { sentinel: string };
    if ('sentinel' in message) sentinels.add(message.sentinel);
    // Read as the workers read it (the published form is the stored one).
    else seen.push({ ...message, state: toBreakerState(message.state)!, receivedAt: Date.now() });
  });
  await subscriber.subscribe(channel);
  return {
    seen,
    /** States of the 'opened' transitions of `key` (tripped, not isolated), in order. */
    opened(key = queueBreakerKey): OpenState[] {
      return seen.flatMap((m) =>
        m.key === key && m.transition === 'opened' && m.state.phase === 'open' ? [m.state] : [],
      );
    },
    transitions(key = queueBreakerKey): string[] {
      return seen.filter((m) => m.key === key).map((m) => m.transition);
    },
    /** Resolves once every message published before this call has arrived. */
    async sync(): Promise<void> {
      const id = String(Math.random());
      // Published from the node that runs the queue's scripts, as transitions
      // are: on a cluster, messages from two nodes may arrive out of order.
      await redis.eval(
        "redis.call('publish', ARGV[1], ARGV[2])",
        1,
        requeueKeys(name).breakerOpenKeys,
        channel,
        JSON.stringify({ sentinel: id }),
      );
      await until(() => sentinels.has(id), 'the sentinel to come back', 5_000, 5);
    },
  };
}

export async function readState(name: string, id: string): Promise<JobState | undefined> {
  return parseJobState(await redis.hget(jobKey(redis, name, id), 'rq'));
}

export function startedBetween(calls: readonly DependencyCall[], from: number, to: number) {
  return calls.filter((c) => c.startedAt >= from && c.startedAt < to);
}

export function jobs(count: number, data: (i: number) => Data = (i) => ({ i })) {
  return Array.from({ length: count }, (_, i) => ({ name: 'call', data: data(i) }));
}

export function breakerJson(options: BreakerOptionsInput): string {
  return JSON.stringify(options);
}

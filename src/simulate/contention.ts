import type { SeededStream } from '../util/random.js';
import type { Random } from '../util/system.js';
import type { RetryPolicy } from '../policy/retry-policy.js';
import { ClientAgenda } from './client-agenda.js';
import {
  policyFor,
  retryDelay,
  seededStream,
  streamRandom,
  type SimStrategy,
} from './sim-strategy.js';
import { checkContentionWork } from './work-bound.js';

/**
 * The contention scenario of the AWS study: `clients` clients each read a
 * row's version, then write the row with optimistic concurrency; a write with
 * a stale version fails, and its client backs off by its strategy and starts
 * over (read, then write) until its write succeeds. Every message takes
 * `|normal(netMeanMs, netSdMs)|` milliseconds.
 * @see Marc Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog, 2015
 *   (aws-samples/aws-arch-backoff-simulator)
 */
export interface ContentionParams {
  /** Clients contending for the row, ≥ 1. */
  clients: number;
  /** Runs averaged per strategy, ≥ 1. */
  trials: number;
  /** The run's seed: the same seed gives the same figures. */
  seed: number;
  /** Mean one-way network delay. @defaultValue `10` */
  netMeanMs: number;
  /** Its standard deviation. @defaultValue `2` */
  netSdMs: number;
  /** Backoff options shared by every strategy (its `strategy` field is ignored). */
  policy: RetryPolicy;
}

/** One strategy's figures, averaged over the trials. */
export interface ContentionResult {
  strategy: SimStrategy;
  /** Writes the row received (successful and stale), per trial. */
  calls: number;
  /** Virtual time until the last client's write succeeded, per trial. */
  timeMs: number;
  /** Events the simulator processed for this strategy, all trials together. */
  events: number;
}

const readAtServer = 0;
const readReply = 1;
const writeAtServer = 2;
const writeReply = 3;

/** Runs the contention scenario for each strategy. */
export function simulateContention(
  strategies: readonly SimStrategy[],
  params: ContentionParams,
): ContentionResult[] {
  checkContentionWork(params, strategies.length);
  const queue = new ClientAgenda(params.clients);
  const retries = new Int32Array(params.clients);
  const previous = new Float64Array(params.clients);
  return strategies.map((strategy) => {
    const policy = policyFor(params.policy, strategy);
    let calls = 0;
    let time = 0;
    let events = 0;
    for (let trial = 0; trial < params.trials; trial++) {
      const net = seededStream(params.seed, strategy, trial, 0);
      const backoff = streamRandom(params.seed, strategy, trial, 1);
      const run = runTrial(strategy, policy, params, net, backoff, queue, retries, previous);
      calls += run.calls;
      time += run.timeMs;
      events += queue.total;
    }
    return { strategy, calls: calls / params.trials, timeMs: time / params.trials, events };
  });
}

function runTrial(
  strategy: SimStrategy,
  policy: RetryPolicy,
  { clients, netMeanMs, netSdMs }: ContentionParams,
  net: SeededStream,
  backoff: Random,
  queue: ClientAgenda,
  retries: Int32Array,
  previous: Float64Array,
): { calls: number; timeMs: number } {
  const delay = (): number => Math.abs(netMeanMs + netSdMs * net.normal());
  queue.clear();
  retries.fill(0);
  previous.fill(NaN);
  for (let client = 0; client < clients; client++) queue.add(client, delay(), readAtServer, 0);
  let version = 0;
  let calls = 0;
  let done = 0;
  // Each client has one event pending: handling it schedules the client's next (or none).
  while (queue.peek()) {
    const { time: now, client } = queue;
    switch (queue.kind) {
      case readAtServer:
        queue.next(now + delay(), readReply, version);
        break;
      case readReply:
        queue.next(now + delay(), writeAtServer, queue.arg);
        break;
      case writeAtServer: {
        calls++;
        const fresh = queue.arg === version;
        if (fresh) version++;
        queue.next(now + delay(), writeReply, fresh ? 1 : 0);
        break;
      }
      case writeReply: {
        if (queue.arg === 1) {
          if (++done === clients) return { calls, timeMs: now };
          queue.drop();
          break;
        }
        const retry = retries[client]!;
        const wait = retryDelay(strategy, policy, retry, previous[client]!, backoff);
        retries[client] = retry + 1;
        previous[client] = wait;
        // Back off, then start over with a fresh read.
        queue.next(now + wait + delay(), readAtServer, 0);
        break;
      }
    }
  }
  throw new Error('contention: the agenda ran dry before every client wrote');
}

import type { SeededStream } from '../util/random.js';
import type { Random } from '../util/system.js';
import type { RetryPolicy } from '../policy/retry-policy.js';
import { ClientAgenda } from './client-agenda.js';
import { policyFor, RetryDelays, seededStream, type SimStrategy } from './sim-strategy.js';
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
  const delays = new MessageDelays(params.netMeanMs, params.netSdMs);
  // One `random` for every trial (each trial swaps its stream in), so the strategies' call has one target.
  let source: SeededStream | undefined;
  const backoff: Random = () => source!.next();
  return strategies.map((strategy) => {
    const waits = new RetryDelays(strategy, policyFor(params.policy, strategy), backoff);
    let calls = 0;
    let time = 0;
    let events = 0;
    for (let trial = 0; trial < params.trials; trial++) {
      delays.restart(seededStream(params.seed, strategy, trial, 0));
      source = seededStream(params.seed, strategy, trial, 1);
      calls += runTrial(params.clients, delays, waits, queue, retries, previous);
      time += queue.time;
      events += queue.total;
    }
    return { strategy, calls: calls / params.trials, timeMs: time / params.trials, events };
  });
}

/**
 * Each message's delay, `|normal(mean, sd)|`, from one stream: the normals
 * are drawn a block at a time, in the order {@link SeededStream.normal}
 * gives them one by one.
 */
class MessageDelays {
  private readonly normals = new Float64Array(256);
  private drawn = 0;
  private stream: SeededStream | undefined;

  constructor(
    private readonly mean: number,
    private readonly sd: number,
  ) {}

  /** Starts over from `stream`'s next normal. */
  restart(stream: SeededStream): void {
    this.stream = stream;
    this.drawn = this.normals.length;
  }

  /** The next message's delay. */
  next(): number {
    if (this.drawn === this.normals.length) {
      this.stream!.fillNormals(this.normals);
      this.drawn = 0;
    }
    return Math.abs(this.mean + this.sd * this.normals[this.drawn++]!);
  }
}

/** One trial; returns the writes the row received, and leaves the last success's time in `queue.time`. */
function runTrial(
  clients: number,
  delays: MessageDelays,
  waits: RetryDelays,
  queue: ClientAgenda,
  retries: Int32Array,
  previous: Float64Array,
): number {
  queue.clear();
  retries.fill(0);
  previous.fill(NaN);
  for (let client = 0; client < clients; client++)
    queue.add(client, delays.next(), readAtServer, 0);
  let version = 0;
  let calls = 0;
  let done = 0;
  // Each client has one event pending: handling it schedules the client's next (or none),
  // at one call of `queue.next` (a single copy of the heap's loop keeps it inlined).
  while (queue.peek()) {
    const now = queue.time;
    let arg = queue.arg;
    let kind = readAtServer;
    let wait = 0;
    switch (queue.kind) {
      case readAtServer:
        kind = readReply;
        arg = version;
        break;
      case readReply:
        kind = writeAtServer;
        break;
      case writeAtServer:
        calls++;
        kind = writeReply;
        if (arg === version) {
          version++;
          arg = 1;
        } else arg = 0;
        break;
      default: {
        // writeReply: done, or back off and start over with a fresh read.
        if (arg === 1) {
          if (++done === clients) return calls;
          queue.drop();
          continue;
        }
        const client = queue.client;
        const retry = retries[client]!;
        wait = waits.delay(retry, previous[client]!);
        retries[client] = retry + 1;
        previous[client] = wait;
        arg = 0;
      }
    }
    queue.next(now + wait + delays.next(), kind, arg);
  }
  throw new Error('contention: the agenda ran dry before every client wrote');
}

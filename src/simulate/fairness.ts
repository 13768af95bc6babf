import { ConfigError } from '../errors/config-error.js';
import { summarize, type Summary } from '../util/stats.js';
import { EventQueue } from './event-queue.js';
import { streamRandom } from './sim-strategy.js';
import type { FieldName } from './work-bound.js';

/**
 * The fairness scenario (issue 22's measurement): one worker pool with
 * `concurrency` slots; one key holds `bigJobs` jobs at the start and, at
 * `smallAtMs`, `smallKeys` other keys receive `smallJobs` each (arriving
 * interleaved: every key's first job, then every key's second…). Each job
 * takes `serviceMs × uniform(0.5, 1.5)`. Dispatch is `fifo` (one list in
 * arrival order, as BullMQ's wait list) or `fair`: start-time fair queuing
 * across keys (Goyal, Vin & Cheng 1996) with every job costing one unit and
 * every key weight one — a job's start tag is `max(virtual time, its key's
 * previous finish tag)`, the smallest tag starts next, the virtual time is
 * the tag last started. SFQ rather than deficit round-robin because its
 * tags need no quantum and a key that wakes up starts at the current
 * virtual time, owed nothing for its idle past. Measured: each key's
 * enqueue → start delay.
 */
export interface FairnessParams {
  seed: number;
  /** Jobs run at once. @defaultValue `16` */
  concurrency: number;
  /** Jobs of the backlogged key, all there at the start. @defaultValue `50_000` */
  bigJobs: number;
  /** Other keys. @defaultValue `10` */
  smallKeys: number;
  /** Jobs per other key. @defaultValue `100` */
  smallJobs: number;
  /** When the other keys' jobs arrive. @defaultValue `1000` */
  smallAtMs: number;
  /** Mean time a job takes (uniform between half and 1.5 times it). @defaultValue `100` */
  serviceMs: number;
}

export const dispatchModes = ['fifo', 'fair'] as const;
export type DispatchMode = (typeof dispatchModes)[number];

/** One key's enqueue → start delays. */
export interface KeyDelays extends Summary {
  /** `big`, or `small-1` … `small-N`. */
  key: string;
  jobs: number;
}

/** One dispatch mode's run. */
export interface FairnessResult {
  dispatch: DispatchMode;
  /** Every key's delays, the big key first. */
  keys: KeyDelays[];
  /** The small keys' delays, all together. */
  small: Summary;
  /** When the last job finished. */
  makespanMs: number;
  events: number;
}

/** The most jobs one fairness run may simulate, every run together (≈ 10 s of CPU here). */
export const maxFairnessJobs = 6_000_000;

/** Refuses a run with no small job or more than {@link maxFairnessJobs}, naming the fields. */
export function checkFairnessWork(
  params: FairnessParams,
  modes: number,
  name: FieldName = (field) => field,
): void {
  const small = params.smallKeys * params.smallJobs;
  if (small === 0)
    throw new ConfigError(
      `${name('smallKeys')} × ${name('smallJobs')}: must be ≥ 1 (the small keys are what is measured)`,
    );
  const jobs = (params.bigJobs + small) * (modes + 1);
  if (jobs > maxFairnessJobs)
    throw new ConfigError(
      `(${name('bigJobs')} (${params.bigJobs}) + ${name('smallKeys')} (${params.smallKeys}) × ${name('smallJobs')} (${params.smallJobs})) × runs (${modes + 1}, the alone reference included) ` +
        `is ${jobs} jobs, more than ${maxFairnessJobs}: lower them`,
    );
}

/** Runs the scenario once per dispatch mode, and once with the small keys alone (the reference). */
export function simulateFairness(
  modes: readonly DispatchMode[],
  params: FairnessParams,
): { results: FairnessResult[]; alone: Summary } {
  checkFairnessWork(params, modes.length);
  const results = modes.map((mode) => runFairness(mode, params));
  const alone = runFairness('fifo', { ...params, bigJobs: 0 }).small;
  return { results, alone };
}

const finish = 0;
const arrive = 1;

function runFairness(dispatch: DispatchMode, params: FairnessParams): FairnessResult {
  const { concurrency, bigJobs, smallKeys, smallJobs, smallAtMs, serviceMs } = params;
  const keys = smallKeys + 1;
  // One stream for every mode (common random numbers): the orders differ, not the luck.
  const random = streamRandom(params.seed, 'fairness', 0, 0);
  const agenda = new EventQueue(2 * concurrency + 2);
  // Per key: arrival time, jobs queued, started, and SFQ's tags.
  const arrivedAt = new Float64Array(keys);
  const queued = new Int32Array(keys);
  const started = new Int32Array(keys);
  const headTag = new Float64Array(keys);
  const lastFinish = new Float64Array(keys);
  const delays = Array.from(
    { length: keys },
    (_, k) => new Float64Array(k === 0 ? bigJobs : smallJobs),
  );
  const byTag = new EventQueue(keys + 1);
  // FIFO: keys in arrival order, each entry one job (the small keys interleaved).
  const fifo = new Int32Array(bigJobs + smallKeys * smallJobs);
  let fifoTail = 0;
  let fifoHead = 0;
  let virtualTime = 0;
  let free = concurrency;
  let makespan = 0;

  const enqueue = (key: number, n: number, now: number): void => {
    if (n === 0) return;
    arrivedAt[key] = now;
    if (queued[key] === 0) {
      headTag[key] = Math.max(virtualTime, lastFinish[key]!);
      byTag.push(headTag[key]!, 0, key, 0);
    }
    queued[key]! += n;
    lastFinish[key] = headTag[key]! + queued[key]!;
  };
  const next = (): number => {
    if (dispatch === 'fifo') return fifoHead < fifoTail ? fifo[fifoHead++]! : -1;
    if (!byTag.pop()) return -1;
    const key = byTag.a;
    virtualTime = headTag[key]!;
    if (queued[key]! > 1) {
      headTag[key]! += 1;
      byTag.push(headTag[key]!, 0, key, 0);
    }
    return key;
  };
  const startJobs = (now: number): void => {
    while (free > 0) {
      const key = next();
      if (key < 0) return;
      queued[key]!--;
      delays[key]![started[key]!++] = now - arrivedAt[key]!;
      free--;
      agenda.push(now + serviceMs * (0.5 + random()), finish, key, 0);
    }
  };

  enqueue(0, bigJobs, 0);
  for (let j = 0; j < bigJobs; j++) fifo[fifoTail++] = 0;
  agenda.push(smallAtMs, arrive, 0, 0);
  startJobs(0);
  while (agenda.pop()) {
    const now = agenda.time;
    if (agenda.kind === arrive) {
      for (let k = 1; k < keys; k++) enqueue(k, smallJobs, now);
      for (let j = 0; j < smallJobs; j++) for (let k = 1; k < keys; k++) fifo[fifoTail++] = k;
    } else {
      free++;
      makespan = now;
    }
    startJobs(now);
  }
  const perKey = delays.flatMap((d, k) =>
    d.length === 0
      ? []
      : [{ key: k === 0 ? 'big' : `small-${k}`, jobs: d.length, ...summarize(d) }],
  );
  const small = new Float64Array(smallKeys * smallJobs);
  for (let k = 1; k < keys; k++) small.set(delays[k]!, (k - 1) * smallJobs);
  return {
    dispatch,
    keys: perKey,
    small: summarize(small),
    makespanMs: makespan,
    events: agenda.total,
  };
}

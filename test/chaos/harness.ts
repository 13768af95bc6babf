/**
 * What the chaos suites (test/chaos/*.chaos.ts) share: a private
 * redis-server each, adds that the model (test/model/model.ts) follows, the
 * check that the delays recorded in the histories respect the policy, and
 * the figures each suite prints and writes to test/chaos/last-run/<suite>.json
 * (quoted by the README's Guarantees table).
 *
 * The suites reuse the model suite's real system (test/model/system.ts: the
 * child workers of test/fixtures/model-worker.ts, which record every handler
 * run) and its end check (test/model/check.ts: every job in exactly one
 * place, no DLQ duplicate, BullMQ's failed set empty, one event per death).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { exponentialCeiling } from '../../src/policy/backoff/backoff.js';
import { parseJobState, type AttemptRecord } from '../../src/policy/job-state.js';
import { startRedisServer, type RedisServerHandle } from '../../src/redis/redis-server.js';
import { seededRandom } from '../../src/util/random.js';
import { allDead } from '../model/dead-records.js';
import type { Model } from '../model/model.js';
import type { ModelJobData, Outcome, RunEntry } from '../model/protocol.js';
import { capMs, type RealSystem } from '../model/system.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An integer from the environment, or `fallback`. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be an integer ≥ 0, got "${raw}"`);
  return n;
}

/** The seed of a suite: CHAOS_SEED, else the clock (printed either way). */
export function chaosSeed(): number {
  return envInt('CHAOS_SEED', Date.now() % 2 ** 31);
}

/**
 * A private redis-server with AOF on. Its port is CHAOS_REDIS_PORT + `offset`
 * when CHAOS_REDIS_PORT is set (so a shared machine can give the suites a
 * range of their own), else a free port.
 */
export async function chaosRedis(
  offset: number,
  appendfsync: 'always' | 'everysec' = 'always',
): Promise<RedisServerHandle> {
  const base = process.env.CHAOS_REDIS_PORT;
  return startRedisServer({
    ...(base ? { port: Number(base) + offset } : {}),
    appendonly: true,
    args: ['--appendfsync', appendfsync],
  });
}

/** The handler plans of the load and crash suites: 30 % fail 1–3 times, 5 % for good. */
export function mixedPlan(random: () => number): Outcome[][] {
  const r = random();
  if (r < 0.05) return [['permanent']];
  if (r < 0.35) {
    const failures = 1 + Math.floor(random() * 3);
    return [[...Array<Outcome>(failures).fill('retry'), 'ok']];
  }
  return [['ok']];
}

/** How an add of {@link addJobs} ended. */
export interface AddTally {
  resolved: number;
  /** Adds whose promise rejected (Redis gone): the job may exist once or not at all. */
  rejected: number;
}

/**
 * Adds `count` jobs with `inFlight` adds at a time, telling the model each
 * one (keyed `key:<seq>` when `keyed`), each lane waiting `paceMs` after
 * each add, until `stop()` says so. An add that rejects is marked uncertain,
 * as the model suite does.
 */
export async function addJobs(
  m: Model,
  r: RealSystem,
  count: number,
  plan: (seq: number) => Outcome[][],
  options: { keyed?: boolean; inFlight?: number; paceMs?: number; stop?: () => boolean } = {},
): Promise<AddTally> {
  const tally: AddTally = { resolved: 0, rejected: 0 };
  const inFlight = options.inFlight ?? 200;
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < count && !options.stop?.()) {
      next += 1;
      const seq = m.nextSeq++;
      const data: ModelJobData = { seq, plan: plan(seq) };
      const key = options.keyed ? `key:${seq}` : undefined;
      try {
        const added = await r.queue.add('chaos', data, key ? { idempotencyKey: key } : {});
        m.add(seq, key, data.plan, added.id);
        tally.resolved += 1;
      } catch {
        m.add(seq, key, data.plan, '?', true);
        tally.rejected += 1;
      }
      if (options.paceMs) await sleep(options.paceMs);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, one));
  return tally;
}

/** Completed jobs and dead records, counted where BullMQ and the DLQ keep them. */
export async function places(r: RealSystem): Promise<{ completed: number; dead: number }> {
  const [completed, dead] = await Promise.all([r.queue.bull.getCompletedCount(), r.dlq.count({})]);
  return { completed, dead };
}

/**
 * Handler runs that did the job's work (outcome `ok`) more than once: the
 * side effects a consumer keyed on `job.idempotencyKey` would see twice.
 */
export function duplicatedSideEffects(runs: readonly RunEntry[]): number {
  const okBySeq = new Map<number, number>();
  for (const run of runs) {
    if (run.outcome === 'ok') okBySeq.set(run.seq, (okBySeq.get(run.seq) ?? 0) + 1);
  }
  let twice = 0;
  for (const n of okBySeq.values()) if (n > 1) twice += 1;
  return twice;
}

/** What {@link checkDelays} found. */
export interface DelayCheck {
  retries: number;
  /** Attempts recorded as `stalled`: their worker lost the job's lock (died, or starved past `lockDurationMs`). */
  stalls: number;
  /** Attempts the worker's `attemptTimeoutMs` cut short (the handler may have done its work: it runs again). */
  timeouts: number;
  /** Each a sentence; empty when every recorded delay respects the policy. */
  violations: string[];
  /** The largest `delayMs` recorded. */
  maxDelayMs: number;
  /** The latest a retry started after the time its delay gave (`retryAt`), in ms. */
  maxLateMs: number;
}

/**
 * Checks the delays recorded in every history (completed jobs' `rq` state
 * and dead records): each failed attempt's retry `delayMs` within the full-jitter bounds of
 * the policy (`[0, min(capMs, baseMs · 2^(attempt − 1))]`), `retryAt` its
 * failure time plus that delay, and the next attempt started no earlier than
 * `retryAt`.
 */
export async function checkDelays(r: RealSystem, baseMs: number): Promise<DelayCheck> {
  const histories: { id: string; history: AttemptRecord[] }[] = [];
  const completed = await r.queue.bull.getRanges(['completed'], 0, -1);
  for (let i = 0; i < completed.length; i += 1_000) {
    const batch = completed.slice(i, i + 1_000);
    const pipeline = r.admin.pipeline();
    for (const id of batch) pipeline.hget(r.queue.bull.toKey(id), 'rq');
    const replies = (await pipeline.exec()) ?? [];
    batch.forEach((id, k) => {
      const state = parseJobState(replies[k]?.[1] as string | null);
      if (state) histories.push({ id, history: state.history });
    });
  }
  for (const record of await allDead(r.dlq)) {
    histories.push({ id: record.id, history: record.history });
  }
  const result: DelayCheck = {
    retries: 0,
    stalls: 0,
    timeouts: 0,
    violations: [],
    maxDelayMs: 0,
    maxLateMs: 0,
  };
  const policy = { baseMs, capMs, factor: 2 };
  for (const { id, history } of histories) {
    history.forEach((entry, k) => {
      // A stall is recorded when the job comes back: no delay was chosen for it.
      if (entry.outcome === 'stalled') result.stalls += 1;
      if (entry.error?.class === 'TimeoutError') result.timeouts += 1;
      if (entry.decision !== 'retry' || entry.outcome !== 'failed') return;
      result.retries += 1;
      const delay = entry.delayMs ?? NaN;
      const ceiling = exponentialCeiling(entry.attempt - 1, policy);
      result.maxDelayMs = Math.max(result.maxDelayMs, delay);
      if (!(delay >= 0 && delay <= ceiling)) {
        result.violations.push(
          `${id} attempt ${entry.attempt}: delay ${delay} ms outside [0, ${ceiling}]`,
        );
      }
      const failedAt = entry.finishedAt ?? entry.startedAt;
      if (entry.retryAt !== undefined && Math.abs(entry.retryAt - (failedAt + delay)) > 1) {
        result.violations.push(
          `${id} attempt ${entry.attempt}: retryAt ${entry.retryAt} is not its failure (${failedAt}) + ${delay} ms`,
        );
      }
      const nextStart = history[k + 1]?.startedAt;
      const due = entry.retryAt ?? failedAt + delay;
      if (nextStart !== undefined) {
        if (nextStart < due) {
          result.violations.push(
            `${id} attempt ${entry.attempt + 1} started at ${nextStart}, ${due - nextStart} ms before its retry was due`,
          );
        } else {
          result.maxLateMs = Math.max(result.maxLateMs, nextStart - due);
        }
      }
    });
  }
  return result;
}

/** One suite's figures, printed as a block and written as JSON for the README. */
export interface Figures {
  suite: string;
  seed: number;
  enqueued: number;
  completed: number;
  dead: number;
  lost: number;
  /** Logical jobs whose work (an `ok` run) ran more than once. */
  duplicatedSideEffects: number;
  /** SIGKILLs (and SIGSTOPs) the suite sent. */
  kills: number;
  /** Processes of requeue that exited without being killed. */
  crashes: number;
  jobsPerSec: number;
  seconds: number;
  [more: string]: unknown;
}

const lastRunDir = fileURLToPath(new URL('./last-run/', import.meta.url));

/** Prints the figures as one block and writes them to test/chaos/last-run/<suite>.json. */
export function report(figures: Figures): void {
  const rows = Object.entries({ ...figures, at: new Date().toISOString() }).map(
    ([name, value]) =>
      `  ${name.padEnd(22)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`,
  );
  console.log(`[chaos] ${figures.suite}\n${rows.join('\n')}`);
  mkdirSync(lastRunDir, { recursive: true });
  writeFileSync(
    `${lastRunDir}${figures.suite}.json`,
    JSON.stringify({ ...figures, at: new Date().toISOString() }, null, 2) + '\n',
  );
}

/** A seeded random for a suite's plans. */
export function planRandom(seed: number): () => number {
  return seededRandom(seed);
}

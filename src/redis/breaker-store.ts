import type { RedisClient } from './connection.js';
import type { BreakerOptions } from '../policy/breaker/breaker-options.js';
import {
  admit,
  forceClose,
  forceOpen,
  onProbeResult,
  onWindow,
  type Admission,
  type BreakerState,
  type BreakerTransition,
  type Step,
  type WindowStats,
} from '../policy/breaker/breaker.js';
import {
  breakerStateView,
  parseBreakerState,
  toStoredBreakerState,
} from '../policy/breaker/breaker-state.js';
import { windowStats } from '../policy/breaker/job-count.js';
import { geometryFor, windowLengthMs, windowSums, type WindowGeometry } from '../policy/window.js';
import { requeueKeys } from './keys.js';
import * as lua from './lua-commands.js';
import { readWindow, recordBreakerWindow } from './window-scripts.js';

/** A breaker transition as published to every worker (`state` as `toStoredBreakerState` writes it). */
export interface BreakerMessage {
  key: string;
  transition: BreakerTransition;
  state: BreakerState;
}

/** A batch of outcomes for one key. */
export interface OutcomeBatch {
  successes: number;
  failures: number;
  /** Failures after the last success of the batch (all of them if none succeeded). */
  trailingFailures: number;
  /**
   * What the batch adds to the window when it counts jobs (`countJob`,
   * `src/policy/breaker/job-count.ts`): 0 for a retry of a job already
   * counted, −1 failure for one that succeeded. Absent: one outcome per
   * attempt, `successes + failures` and `failures`.
   */
  counted?: { total: number; failures: number };
}

/** What `requeue breaker status` shows for one key. */
export interface BreakerStatus {
  key: string;
  state: BreakerState;
  window: WindowStats & {
    failureRate: number;
    /**
     * The geometry the live window really has (the first writer's, which
     * wins while the window lives), whatever this store's options say;
     * `undefined` when there is no window.
     */
    geometry: WindowGeometry | undefined;
  };
}

/**
 * A status as `requeue breaker status --json` and the admin API show it:
 * flat, times in ms since the epoch, `halfOpenAt` only while open.
 */
export function breakerStatusView(s: BreakerStatus) {
  const view = breakerStateView(s.state);
  return {
    key: s.key,
    state: view.state,
    isolated: view.isolated,
    failureRate: s.window.failureRate,
    failures: s.window.failures,
    total: s.window.total,
    consecutiveFailures: s.window.consecutiveFailures,
    openedAt: view.openedAt,
    halfOpenAt: view.halfOpenAt,
    probesInFlight: Object.keys(s.state.probes).length,
    trips: s.state.trips,
    // The live window's own geometry (null: no window yet).
    windowMs: s.window.geometry ? windowLengthMs(s.window.geometry) : null,
    buckets: s.window.geometry?.buckets ?? null,
  };
}

/** Optional observers of a {@link BreakerStore}. */
export interface BreakerStoreHooks {
  /**
   * Called on each write to a window whose stored geometry differs from this
   * store's options (another worker's options, still live): the stored one
   * is used. @see src/policy/window.ts for the rule.
   */
  onForeignGeometry?: (key: string, stored: WindowGeometry, own: WindowGeometry) => void;
}

const maxCasAttempts = 8;

/**
 * Keeps breakers in Redis. Each change reads the state, asks the pure state
 * machine (`src/policy/breaker/breaker.ts`) for the next one, and writes it
 * with a compare-and-set script that also publishes the transition: two
 * workers racing make one transition, and probes are never over-admitted.
 */
export class BreakerStore {
  private readonly keys;
  private readonly redis;
  /** The geometry this store proposes for a new window. */
  private readonly geometry: WindowGeometry;

  constructor(
    redis: RedisClient,
    readonly queue: string,
    private readonly options: BreakerOptions,
    private readonly hooks: BreakerStoreHooks = {},
  ) {
    this.redis = redis;
    this.keys = requeueKeys(queue);
    this.geometry = geometryFor(options.windowMs, options.buckets);
  }

  get channel(): string {
    return this.keys.breakerChannel;
  }

  async read(key: string): Promise<{ state: BreakerState; version: number }> {
    const [raw, version] = await this.redis.hmget(this.keys.breaker(key), 's', 'v');
    return { state: parseBreakerState(raw), version: Number(version ?? 0) };
  }

  /**
   * Adds outcomes to the window and trips the breaker if the window calls for
   * it. The window runs on Redis's clock; `now` (the worker's) dates the
   * breaker's state (`openedAt`, `halfOpenAt`).
   */
  async record(key: string, batch: OutcomeBatch, now: number): Promise<BreakerMessage | undefined> {
    const recorded = await recordBreakerWindow(
      this.redis,
      {
        window: this.keys.breakerWindow(key),
        state: this.keys.breaker(key),
        seenKeys: this.keys.breakerSeenKeys,
        openKeys: this.keys.breakerOpenKeys,
        statePrefix: this.keys.breakerPrefix,
      },
      {
        geometry: this.geometry,
        total: batch.counted?.total ?? batch.successes + batch.failures,
        failures: batch.counted?.failures ?? batch.failures,
        trailingFailures: batch.trailingFailures,
        hadSuccess: batch.successes > 0,
        breakerKey: key,
        attempts: batch.successes + batch.failures,
        idleMs: this.options.idleMs,
      },
    );
    if (
      recorded.geometry.bucketMs !== this.geometry.bucketMs ||
      recorded.geometry.buckets !== this.geometry.buckets
    )
      this.hooks.onForeignGeometry?.(key, recorded.geometry, this.geometry);
    const stats = windowStats(recorded.total, recorded.failures, recorded.consecutiveFailures);
    const first = { state: parseBreakerState(recorded.rawState), version: recorded.version };
    const { message } = await this.change(
      key,
      (state) => onWindow(state, stats, now, this.options),
      first,
    );
    return message;
  }

  /**
   * Asks whether a job may run now; may move open → half-open and take a
   * probe slot. `retry`: the job already failed (retries probe first).
   */
  async admit(
    key: string,
    probeId: string,
    now: number,
    retry = true,
  ): Promise<{ admission: Admission; message?: BreakerMessage }> {
    const { verdict, message } = await this.change(key, (state) =>
      admit(state, now, probeId, this.options, retry),
    );
    return { admission: verdict, ...(message ? { message } : {}) };
  }

  /** Reports a probe's result: closes or reopens the circuit. */
  async probeResult(
    key: string,
    probeId: string,
    success: boolean,
    now: number,
  ): Promise<BreakerMessage | undefined> {
    const { message } = await this.change(key, (state) =>
      onProbeResult(state, probeId, success, now, this.options),
    );
    return message;
  }

  /** Isolates a key: open until closed by hand. */
  async forceOpen(key: string, now: number): Promise<BreakerMessage | undefined> {
    return (await this.change(key, (state) => forceOpen(state, now))).message;
  }

  /** Resets a key: closed, window cleared. */
  async forceClose(key: string): Promise<BreakerMessage | undefined> {
    return (await this.change(key, (state) => forceClose(state), undefined, true)).message;
  }

  /** Keys whose breaker is not closed, with their states. */
  async openBreakers(): Promise<Map<string, BreakerState>> {
    const [open, isolated] = await Promise.all([
      this.redis.smembers(this.keys.breakerOpenKeys),
      this.redis.smembers(this.keys.breakerIsolatedKeys),
    ]);
    const keys = [...new Set([...open, ...isolated])];
    // Sent together, not one round trip after another: a scrape or a reload
    // with a thousand endpoints down takes one wait, not a thousand.
    const states = await Promise.all(keys.map((key) => this.read(key)));
    return new Map(keys.map((key, i) => [key, states[i]!.state]));
  }

  /** Every key that has recorded outcomes or been set by hand. */
  async knownKeys(): Promise<string[]> {
    const [seen, known, open, isolated] = await Promise.all([
      this.redis.zrange(this.keys.breakerSeenKeys, 0, -1),
      this.redis.smembers(this.keys.breakerKnownKeys),
      this.redis.smembers(this.keys.breakerOpenKeys),
      this.redis.smembers(this.keys.breakerIsolatedKeys),
    ]);
    return [...new Set([...seen, ...known, ...open, ...isolated])].sort();
  }

  /**
   * State and window of one key, for status displays. A pure read: the
   * window is summed here with the geometry stored with it and Redis's
   * clock, so this store's own options play no part and nothing is written.
   * @param _now ignored, kept for callers of earlier versions: the window
   * runs on Redis's clock.
   */
  async status(key: string, _now?: number): Promise<BreakerStatus> {
    const [{ state }, { window, nowMs }] = await Promise.all([
      this.read(key),
      readWindow(this.redis, this.keys.breakerWindow(key)),
    ]);
    const sums = windowSums(window, nowMs);
    const stats = windowStats(sums.t ?? 0, sums.f ?? 0, Number(window.other.cf ?? 0));
    const { total, failures } = stats;
    return {
      key,
      state,
      window: {
        ...stats,
        failureRate: total > 0 ? failures / total : 0,
        geometry: window.geometry,
      },
    };
  }

  /**
   * Read, step, compare-and-set; again on a lost race. A step that changes
   * nothing writes nothing.
   */
  private async change<V>(
    key: string,
    step: (state: BreakerState) => Step<V>,
    first?: { state: BreakerState; version: number },
    clearWindow = false,
  ): Promise<{ verdict: V; message?: BreakerMessage }> {
    let current = first ?? (await this.read(key));
    for (let attempt = 0; attempt < maxCasAttempts; attempt += 1) {
      const next = step(current.state);
      if (!clearWindow && JSON.stringify(next.state) === JSON.stringify(current.state)) {
        return { verdict: next.verdict };
      }
      const message = next.transition
        ? { key, transition: next.transition, state: next.state }
        : undefined;
      const stored = toStoredBreakerState(next.state);
      const written = await lua.breakerCas(
        this.redis,
        [
          this.keys.breaker(key),
          this.keys.breakerWindow(key),
          this.keys.breakerOpenKeys,
          this.keys.breakerIsolatedKeys,
        ],
        [
          current.version,
          JSON.stringify(stored),
          stored.phase,
          key,
          this.keys.breakerChannel,
          message ? JSON.stringify({ ...message, state: stored }) : '',
          // A reset clears the window; a close from half-open forgets its failures only.
          clearWindow ? 1 : next.transition === 'closed' ? 2 : 0,
          this.options.idleMs,
          next.state.phase === 'isolated' ? 1 : 0,
        ],
      );
      if (written === 1) return { verdict: next.verdict, ...(message ? { message } : {}) };
      current = await this.read(key);
    }
    throw new Error(
      `breaker ${this.queue}/${key}: too much contention, gave up after ${maxCasAttempts} tries`,
    );
  }
}

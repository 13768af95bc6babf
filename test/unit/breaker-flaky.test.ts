import { describe, expect, it } from 'vitest';
import {
  parseBreakerOptions,
  type BreakerOptions,
  type BreakerOptionsInput,
} from '../../src/policy/breaker/breaker-options.js';
import {
  admit,
  closedState,
  onProbeResult,
  onWindow,
  type BreakerState,
  type Step,
} from '../../src/policy/breaker/breaker.js';
import {
  countJob,
  countsAgainst,
  windowStats,
  type FailureStreak,
} from '../../src/policy/breaker/job-count.js';
import {
  addToWindow,
  dropCounters,
  emptyWindow,
  geometryFor,
  windowSums,
  type WindowHash,
} from '../../src/policy/window.js';
import { seededRandom } from '../../src/util/random.js';
import { webhookBreakerDefaults } from '../../workers/webhook/webhook-worker.js';

/** The reference time of these tests. */
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

const webhook = parseBreakerOptions(webhookBreakerDefaults);

/** How an endpoint answers the `attempt`-th (1-based) attempt of a job. */
type Endpoint = (attempt: number) => boolean;
const flaky: Endpoint = (attempt) => attempt > 1;
const down: Endpoint = () => false;

interface Run {
  /** Jobs delivered, and when the last one was. */
  delivered: number;
  lastDeliveredAt: number;
  /** Every call the endpoint received, by time. */
  calls: number[];
  /** Calls made before the first opening. */
  callsBeforeOpen: number;
  /** When each opening, half-open and close happened. */
  transitions: { at: number; transition: string }[];
}

/**
 * One worker (one call at a time, `callMs` each) in virtual time, with the
 * breaker's pure functions and the window as Redis keeps it: `jobs` jobs
 * due at T0, retried after a full-jitter backoff (1 s base, 30 s cap, 5
 * attempts, as the webhook worker's policy), turned away by the breaker to
 * `retryAt` plus up to 1 s (as `deferredUntil` spreads them).
 */
function simulate(
  endpoint: Endpoint,
  o: BreakerOptions,
  { jobs = 300, untilMs = 60_000, callMs = 5, seed = 1 } = {},
): Run {
  const random = seededRandom(seed);
  const geometry = geometryFor(o.windowMs, o.buckets);
  let state: BreakerState = closedState();
  let window: WindowHash = emptyWindow;
  const run: Run = {
    delivered: 0,
    lastDeliveredAt: 0,
    calls: [],
    callsBeforeOpen: 0,
    transitions: [],
  };
  const due = Array.from({ length: jobs }, (_, id) => ({
    id,
    at: T0,
    attempts: 0,
    streak: undefined as FailureStreak | undefined,
  }));
  const step = <V>(s: Step<V>, now: number): V => {
    state = s.state;
    if (s.transition) run.transitions.push({ at: now, transition: s.transition });
    if (s.transition === 'closed') window = dropCounters(window, 'f', ['cf']);
    return s.verdict;
  };
  let now = T0;
  while (due.length > 0) {
    due.sort((a, b) => a.at - b.at || a.id - b.id);
    const job = due.shift()!;
    now = Math.max(now, job.at);
    if (now - T0 > untilMs) break;
    let probeId: string | undefined;
    if (state.phase !== 'closed') {
      const verdict = step(
        admit(state, now, `${job.id}:${job.attempts}`, o, job.attempts > 0),
        now,
      );
      if (verdict.kind === 'reject') {
        due.push({ ...job, at: verdict.retryAt + Math.floor(random() * 1_000) });
        continue;
      }
      if (verdict.kind === 'probe') probeId = verdict.probeId;
    }
    job.attempts += 1;
    run.calls.push(now);
    if (!run.transitions.some((t) => t.transition === 'opened')) run.callsBeforeOpen += 1;
    now += callMs;
    const success = endpoint(job.attempts);
    if (probeId !== undefined) step(onProbeResult(state, probeId, success, now, o), now);
    else {
      const counted = countJob(success, job.streak, now, o);
      job.streak = counted.streak;
      window = addToWindow(window, now, geometry, { t: counted.total, f: counted.failures });
      const sums = windowSums(window, now);
      step(onWindow(state, windowStats(sums.t ?? 0, sums.f ?? 0, 0), now, o), now);
    }
    if (success) {
      run.delivered += 1;
      run.lastDeliveredAt = now;
    } else if (job.attempts < 5) {
      const capMs = Math.min(30_000, 1_000 * 2 ** (job.attempts - 1));
      due.push({ ...job, at: now + Math.floor(random() * capMs) });
    }
  }
  return run;
}

describe('a breaker that tells flaky from down (pure policy)', () => {
  it('a flaky endpoint whose retries succeed is not cut off: 300/300, one opening, closed at once', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const run = simulate(flaky, webhook, { seed });
      expect(run.delivered).toBe(300);
      expect(run.lastDeliveredAt - T0).toBeLessThan(30_000);
      // The first minimumRequests first tries look like an outage; the first
      // half-open period, probed by retries, closes it, and it stays closed.
      const opened = run.transitions.filter((t) => t.transition === 'opened');
      expect(opened.length).toBeLessThanOrEqual(1);
      const closed = run.transitions.find((t) => t.transition === 'closed');
      if (opened[0]) expect(closed!.at - opened[0].at).toBeLessThan(webhook.openMs + 2_000);
    }
  });

  it('a flaky endpoint behind a backlog of 2,000 first tries: all delivered, every opening closed by its first half-open period', () => {
    // Retries wait behind the backlog (FIFO), so its first tries can fill the
    // window with failures no retry has taken back yet: it may open again,
    // but its retries close it again at once.
    const run = simulate(flaky, webhook, { jobs: 2_000, untilMs: 120_000 });
    expect(run.delivered).toBe(2_000);
    expect(run.lastDeliveredAt - T0).toBeLessThan(60_000);
    const phases = run.transitions.map((t) => t.transition).join(' ');
    expect(phases).not.toMatch(/half-open opened/);
  });

  it('an endpoint that fails everything opens after minimumRequests calls', () => {
    for (const input of [
      webhookBreakerDefaults,
      {},
      { minimumRequests: 25 },
    ] as BreakerOptionsInput[]) {
      const o = parseBreakerOptions(input);
      const run = simulate(down, o, { untilMs: 5_000 });
      expect(run.callsBeforeOpen).toBe(o.minimumRequests);
    }
  });

  it('while down, probes are bounded: at most 3 calls per half-open period, periods growing to maxOpenMs', () => {
    const run = simulate(down, webhook, { untilMs: 600_000 });
    const firstOpen = run.transitions.find((t) => t.transition === 'opened')!.at;
    const opened = run.transitions.filter((t) => t.transition === 'opened').map((t) => t.at);
    for (let i = 0; i + 1 < opened.length; i += 1) {
      const between = run.calls.filter((at) => at > opened[i]! && at <= opened[i + 1]!);
      expect(between.length).toBeLessThanOrEqual(3);
      expect(opened[i + 1]! - opened[i]!).toBeGreaterThanOrEqual(webhook.openMs);
    }
    // Ten minutes after the first opening: ≤ 3 calls per 30 s (maxOpenMs), ≤ 0.1/s.
    const after = run.calls.filter((at) => at > firstOpen);
    expect(after.length / ((run.calls.at(-1)! - firstOpen) / 1000)).toBeLessThanOrEqual(0.15);
    expect(run.delivered).toBe(0);
  });

  it('half-open, a retry probes at once and a first try only firstTryProbeDelayMs later', () => {
    const o = parseBreakerOptions({ minimumRequests: 1, firstTryProbeDelayMs: 1_000 });
    const open = onWindow(closedState(), windowStats(1, 1, 1), T0, o).state;
    if (open.phase !== 'open') throw new Error(`expected an open circuit, not ${open.phase}`);
    const at = open.halfOpenAt;
    const first = admit(open, at, 'first', o, false);
    expect(first.transition).toBe('half-open');
    expect(first.verdict).toEqual({ kind: 'reject', retryAt: at + 1_000 });
    const retry = admit(first.state, at + 10, 'retry', o, true);
    expect(retry.verdict).toEqual({ kind: 'probe', probeId: 'retry' });
    const later = admit(
      onProbeResult(retry.state, 'retry', false, at + 20, o).state,
      at + 20,
      'x',
      o,
      false,
    );
    // The failed retry reopened it: a down endpoint is judged by its retries.
    expect(later.verdict.kind).toBe('reject');
    expect(later.state.phase).toBe('open');
    // After the delay a first try may probe (a queue without retries still closes).
    const half = admit(open, at + 1_000, 'late-first', o, false);
    expect(half.verdict).toEqual({ kind: 'probe', probeId: 'late-first' });
    // 0 keeps the old rule: any job probes at once.
    const any = parseBreakerOptions({ minimumRequests: 1, firstTryProbeDelayMs: 0 });
    expect(admit(open, at, 'f', any, false).verdict.kind).toBe('probe');
  });
});

describe('the window counts jobs (countJob)', () => {
  const o = parseBreakerOptions({ windowMs: 10_000, buckets: 10 });

  it('a first failure adds a job and a failure; its retry adds nothing if it fails, takes it back if it succeeds', () => {
    const first = countJob(false, undefined, T0, o);
    expect(first).toEqual({ total: 1, failures: 1, streak: { failedAt: T0, failures: 1 } });
    const second = countJob(false, first.streak, T0 + 500, o);
    expect(second).toEqual({ total: 0, failures: 0, streak: { failedAt: T0, failures: 2 } });
    expect(countJob(true, second.streak, T0 + 900, o)).toEqual({
      total: 0,
      failures: -1,
      streak: undefined,
    });
    expect(countJob(true, undefined, T0, o)).toEqual({ total: 1, failures: 0, streak: undefined });
  });

  it('a failure that may have left the window (older than the window less a bucket) counts afresh', () => {
    const streak = { failedAt: T0, failures: 3 };
    expect(countJob(true, streak, T0 + 8_999, o).failures).toBe(-1);
    expect(countJob(true, streak, T0 + 9_000, o)).toEqual({
      total: 1,
      failures: 0,
      streak: undefined,
    });
    expect(countJob(false, streak, T0 + 9_000, o)).toEqual({
      total: 1,
      failures: 1,
      streak: { failedAt: T0 + 9_000, failures: 1 },
    });
    // A failure dated in the future (another worker's clock ahead) is not taken back.
    expect(countJob(true, { failedAt: T0 + 1, failures: 1 }, T0, o).total).toBe(1);
  });

  it('the window is judged with failures within [0, total]', () => {
    expect(windowStats(10, -3, 0)).toEqual({ total: 10, failures: 0, consecutiveFailures: 0 });
    expect(windowStats(3, 5, 2)).toEqual({ total: 3, failures: 3, consecutiveFailures: 2 });
    expect(windowStats(-1, -1, 0)).toEqual({ total: 0, failures: 0, consecutiveFailures: 0 });
  });

  it('timeouts, refused connections and 5xx count against the dependency; 429s, pauses and permanent answers do not', () => {
    expect(countsAgainst({ kind: 'retry', timeout: true, paused: false })).toBe(true);
    expect(countsAgainst({ kind: 'retry', code: 'ECONNREFUSED', paused: false })).toBe(true);
    expect(countsAgainst({ kind: 'retry', status: 503, paused: false })).toBe(true);
    expect(countsAgainst({ kind: 'retry', status: 429, paused: false })).toBe(false);
    expect(countsAgainst({ kind: 'retry', status: 503, paused: true })).toBe(false);
    expect(countsAgainst({ kind: 'permanent', status: 400, paused: false })).toBe(false);
  });
});

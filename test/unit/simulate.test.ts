import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { retryPolicySchema } from '../../src/policy/retry-policy.js';
import { simulateContention, type ContentionParams } from '../../src/simulate/contention.js';
import { ClientAgenda } from '../../src/simulate/client-agenda.js';
import { EventQueue } from '../../src/simulate/event-queue.js';
import {
  seed004Delay,
  serverLatencyMs,
  simulateOutage,
  type OutageParams,
} from '../../src/simulate/outage.js';
import { policyFor, RetryDelays } from '../../src/simulate/sim-strategy.js';
import { computeDelay } from '../../src/policy/backoff/index.js';
import { SeededStream, seededRandom, standardNormal } from '../../src/util/random.js';
import { seed004Outage } from '../harness/outage-params.js';

const contention: ContentionParams = {
  clients: 100,
  trials: 20,
  seed: 7,
  netMeanMs: 10,
  netSdMs: 2,
  policy: retryPolicySchema.parse({ baseMs: 5, capMs: 2000 }),
};

/** Seed 004's outage, shortened to 90 s, with a backlog of 512 (see the README for 1024). */
const outage: OutageParams = {
  ...seed004Outage,
  durationMs: 90_000,
  server: { ...seed004Outage.server, backlog: 512 },
};

describe('EventQueue', () => {
  it('gives events back in time order, ties in the order they were scheduled, growing as needed', () => {
    const queue = new EventQueue(2);
    const random = seededRandom(3);
    const times: number[] = [];
    for (let i = 0; i < 500; i++) {
      const time = Math.floor(random() * 50);
      times.push(time);
      queue.push(time, i % 7, i, -i);
    }
    const seen: [number, number][] = [];
    while (queue.pop()) {
      expect(queue.b + queue.a).toBe(0);
      expect(queue.kind).toBe(queue.a % 7);
      seen.push([queue.time, queue.a]);
    }
    const expected = times.map((t, i) => [t, i] as [number, number]);
    expected.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    expect(seen).toEqual(expected);
    expect(queue.total).toBe(500);
  });
});

describe('simulateContention', () => {
  it('is exactly repeatable: the same seed gives the same figures, whatever runs beside', () => {
    const alone = simulateContention(['full-jitter'], contention);
    const together = simulateContention(['exponential', 'full-jitter'], contention);
    expect(together[1]).toEqual(alone[0]);
    expect(simulateContention(['full-jitter'], { ...contention, seed: 8 })[0]).not.toEqual(
      alone[0],
    );
  });

  it('jitter does less than half the work of plain exponential backoff (the AWS study)', () => {
    const [exponential, full, equal, decorrelated] = simulateContention(
      ['exponential', 'full-jitter', 'equal-jitter', 'decorrelated-jitter'],
      contention,
    );
    expect(full!.calls).toBeLessThan(exponential!.calls / 2);
    expect(equal!.calls).toBeLessThan(exponential!.calls / 2);
    expect(decorrelated!.calls).toBeLessThan(exponential!.calls * 0.6);
    // …and finishes long before it: plain exponential clients stay in step.
    expect(full!.timeMs).toBeLessThan(exponential!.timeMs / 5);
  });

  it('counts every write: at least one per client, and immediate retries write the most', () => {
    const [none, full] = simulateContention(['none', 'full-jitter'], contention);
    expect(full!.calls).toBeGreaterThanOrEqual(contention.clients);
    expect(none!.calls).toBeGreaterThan(2 * full!.calls);
    // One client has nothing to contend with: one read, one write, four messages.
    const [solo] = simulateContention(['exponential'], { ...contention, clients: 1, netSdMs: 0 });
    expect(solo).toMatchObject({ calls: 1, timeMs: 40 });
  });
});

describe('serverLatencyMs', () => {
  it('is minDelay up to the limit, then grows by the factor every K more', () => {
    expect(serverLatencyMs(30, outage.server)).toBe(100);
    expect(serverLatencyMs(45, outage.server)).toBeCloseTo(105, 9);
    expect(serverLatencyMs(60, outage.server)).toBeCloseTo(110.25, 9);
  });
});

describe('simulateOutage (seed 004)', () => {
  it('fixed-interval retries keep the stopped server down, and so does exponential backoff from 100 ms', () => {
    const [fixed, exponential] = simulateOutage(['fixed', 'exponential'], outage);
    expect(fixed!.recovered).toBe(false);
    expect(fixed!.recoveryMs).toBeNull();
    expect(fixed!.serverRecovered).toBe(false);
    expect(fixed!.peakConcurrency).toBeGreaterThan(10_000);
    expect(fixed!.perSecond.at(-1)!.ok).toBe(0);
    // requeue's chain starts at baseMs: each client retries 5–6 times in the 20 s.
    expect(exponential!.recovered).toBe(false);
    expect(exponential!.serverRecovered).toBe(false);
    expect(exponential!.peakConcurrency).toBeGreaterThan(5000);
  });

  it('regression: a connection the full backlog refused was lost; it keeps dialling and lands on resume', () => {
    // Exponential backoff from 100 ms "recovered" at a backlog of 512 only because the
    // connections beyond it vanished. Now any backlog gives the same run: all of them land.
    const tiny = simulateOutage(['exponential'], {
      ...outage,
      server: { ...outage.server, backlog: 0 },
    });
    const huge = simulateOutage(['exponential'], {
      ...outage,
      server: { ...outage.server, backlog: 1_000_000 },
    });
    expect(tiny).toEqual(huge);
    expect(tiny[0]!.recovered).toBe(false);
    // …but a dial gives up after 30 s (Go's dial timeout): a 40 s outage loses the first 10 s.
    const long = { ...outage, stopForMs: 40_000, durationMs: 120_000 };
    const [lost] = simulateOutage(['exponential'], {
      ...long,
      server: { ...long.server, backlog: 0 },
    });
    const [kept] = simulateOutage(['exponential'], {
      ...long,
      server: { ...long.server, backlog: 1_000_000 },
    });
    expect(lost!.calls).toBeLessThan(kept!.calls);
  });

  it('reports every second, with the load of about 100 req/s before the outage and nothing answered during it', () => {
    const [run] = simulateOutage(['exponential'], outage);
    expect(run!.perSecond).toHaveLength(90);
    expect(run!.perSecond.map((s) => s.t)).toEqual([...Array(90).keys()]);
    expect(run!.baselineOkPerSecond).toBeGreaterThan(85);
    expect(run!.baselineOkPerSecond).toBeLessThan(115);
    for (const s of run!.perSecond.slice(16, 35)) expect(s.ok).toBe(0);
  });

  it('is exactly repeatable', () => {
    const first = simulateOutage(['normal-jitter'], outage);
    expect(simulateOutage(['normal-jitter'], outage)).toEqual(first);
  });

  it('a token-bucket budget that delays to the cap rescues even fixed-interval retries (with a cap short enough to come back)', () => {
    const params = {
      ...outage,
      server: { ...outage.server, backlog: 1024 },
      policy: { ...outage.policy, capMs: 30_000 },
    };
    const [without] = simulateOutage(['fixed'], params);
    const toCap = parseBudgetOptions({ onEmpty: 'delay-to-cap' });
    const [withBudget] = simulateOutage(['fixed'], { ...params, budget: toCap });
    expect(without!.recovered).toBe(false);
    expect(withBudget!.recovered).toBe(true);
    // The default spreads parked retries over 5–10 s: alone, with nothing bounding what is in
    // flight, they come back during the 20 s outage and keep it buried; with the worker's
    // concurrency limit beside it, it recovers (test/unit/simulate-protect.test.ts).
    const [spread] = simulateOutage(['fixed'], { ...params, budget: parseBudgetOptions({}) });
    expect(spread!.recovered).toBe(false);
    expect(withBudget!.peakConcurrency).toBeLessThanOrEqual(1024);
  });

  it('a breaker that probes every 5 s rescues fixed-interval retries; refused requests are counted as errors', () => {
    const breaker = parseBreakerOptions({ openMs: 5000 });
    const [fixed] = simulateOutage(['fixed'], { ...outage, breaker });
    expect(fixed!.recovered).toBe(true);
    expect(fixed!.perSecond.reduce((n, s) => n + s.errors, 0)).toBeGreaterThan(0);
  });
});

describe("seed 004's client (client.go), exactly", () => {
  const policy = retryPolicySchema.parse({
    baseMs: 100,
    capMs: 300_000,
    factor: 2.71828,
    jitter: 0.1,
  });
  /** A Random whose standard normal is √(−2 ln 0.5) = 1.1774…: u = 0.5, v = 0. */
  const plusOneSd = () => {
    const values = [0.5, 0];
    let i = 0;
    return () => values[i++ % 2]!;
  };
  const sd = Math.sqrt(-2 * Math.log(0.5)) * 100;

  it('starts the chain from the last sleep (a think gap), × factor, capped, then ± an absolute 100 ms', () => {
    expect(seed004Delay('exponential', policy, 10_000, plusOneSd())).toBeCloseTo(27_182.8 + sd, 6);
    expect(seed004Delay('exponential', policy, 200_000, plusOneSd())).toBeCloseTo(300_000 + sd, 6);
    // A negative last delay (jitter past zero) stays negative: Go sleeps 0 and keeps it.
    expect(seed004Delay('exponential', policy, -50, plusOneSd())).toBeCloseTo(-135.914 + sd, 6);
    expect(seed004Delay('fixed', policy, 10_000, plusOneSd())).toBe(100);
  });

  const seed004: OutageParams = {
    ...outage,
    durationMs: 180_000,
    server: { ...outage.server, backlog: 4097 },
    policy,
    client: 'seed004',
  };

  it('at the simulator defaults fixed never recovers and exponential is back 3 s after the resume, as the real code was', () => {
    const [fixed, exponential] = simulateOutage(['fixed', 'exponential'], seed004);
    expect(fixed!.serverRecovered).toBe(false);
    expect(fixed!.recovered).toBe(false);
    expect(exponential!.serverRecoveryMs).toBe(3000);
    // The real run: 1043, 1067, 1096, then 3.
    expect(exponential!.perSecond.slice(35, 39).map((s) => s.concurrency)).toEqual([
      1027, 1054, 1075, 4,
    ]);
    // Its clients, asleep in backoffs of ~27 s × 2.718^n, take far longer to come back.
    expect(exponential!.recoveryMs).toBe(42_000);
  });

  it('gives the same verdicts at every listen backlog (the refused connections land on resume)', () => {
    for (const backlog of [129, 1024]) {
      const [fixed, exponential] = simulateOutage(['fixed', 'exponential'], {
        ...seed004,
        server: { ...seed004.server, backlog },
      });
      expect(fixed!.serverRecovered).toBe(false);
      expect(exponential!.serverRecoveryMs).toBe(3000);
    }
  });

  it('has only fixed and exponential', () => {
    expect(() => simulateOutage(['full-jitter'], seed004)).toThrow(
      /^client: seed004's client retries by fixed or exponential only, got strategy "full-jitter"$/,
    );
  });
});

describe('ClientAgenda', () => {
  it('takes events in the order EventQueue would: time, then the order they were scheduled', () => {
    const random = seededRandom(5);
    const agenda = new ClientAgenda(50);
    const queue = new EventQueue(4);
    for (let c = 0; c < 50; c++) {
      // Whole-millisecond times: many ties, which the scheduling order must break.
      const t = Math.floor(random() * 20);
      agenda.add(c, t, c % 4, -c);
      queue.push(t, c % 4, c, -c);
    }
    const seen: number[][] = [];
    const expected: number[][] = [];
    for (let step = 0; step < 400; step++) {
      const more = queue.pop();
      expect(agenda.peek()).toBe(more);
      if (!more) break;
      seen.push([agenda.time, agenda.client, agenda.kind, agenda.arg]);
      expected.push([queue.time, queue.a, queue.kind, queue.b]);
      // Each handled event schedules its client's next, or (one in ten) ends the client.
      if (random() < 0.1) agenda.drop();
      else {
        const t = agenda.time + Math.floor(random() * 5);
        agenda.next(t, (agenda.kind + 1) % 4, step);
        queue.push(t, (queue.kind + 1) % 4, queue.a, step);
      }
    }
    expect(seen.length).toBeGreaterThan(300);
    expect(seen).toEqual(expected);
  });
});

describe('SeededStream', () => {
  it('draws the very numbers seededRandom and standardNormal draw from the same seed', () => {
    for (const seed of [0, 7, 0xffffffff, 123456789]) {
      const stream = new SeededStream(seed);
      const random = seededRandom(seed);
      for (let i = 0; i < 1000; i++) expect(stream.next()).toBe(random());
      for (let i = 0; i < 1000; i++) expect(stream.normal()).toBe(standardNormal(random));
    }
  });

  it('fills a block with the normals normal() gives one by one, block after block, then goes on', () => {
    for (const seed of [0, 7, 0xffffffff]) {
      const filled = new SeededStream(seed);
      const one = new SeededStream(seed);
      const block = new Float64Array(37);
      for (let round = 0; round < 5; round++) {
        filled.fillNormals(block);
        for (const value of block) expect(value).toBe(one.normal());
      }
      expect(filled.next()).toBe(one.next());
    }
  });
});

describe('RetryDelays', () => {
  it('gives the delays computeDelay gives, the previous delay passed from the second retry on', () => {
    const policy = retryPolicySchema.parse({ baseMs: 5, capMs: 2000 });
    for (const strategy of ['exponential', 'full-jitter', 'decorrelated-jitter'] as const) {
      const delays = new RetryDelays(strategy, policyFor(policy, strategy), seededRandom(3));
      const random = seededRandom(3);
      let previous = NaN;
      for (let retry = 0; retry < 12; retry++) {
        const expected = computeDelay(policyFor(policy, strategy), {
          retry,
          previousDelayMs: retry === 0 ? undefined : previous,
          random,
        });
        previous = delays.delay(retry, previous);
        expect(previous).toBe(expected);
      }
    }
    expect(new RetryDelays('none', policy, seededRandom(3)).delay(4, 80)).toBe(0);
  });
});

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';

interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

let stdout = '';
let stderr = '';

beforeEach(() => {
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Runs `requeue simulate …` in this process, capturing its output. */
async function simulate(...args: string[]): Promise<Captured> {
  stdout = '';
  stderr = '';
  const code = await runCli(['node', 'requeue', 'simulate', ...args]);
  return { code, stdout, stderr };
}

const quickOutage = ['--scenario', 'outage', '--clients', '200', '--duration-ms', '50000'];

describe('requeue simulate --json', () => {
  it('contention: the scenario, its parameters and calls and time per strategy', async () => {
    const args = ['--scenario', 'contention', '--clients', '20', '--trials', '5', '--json'];
    const { code, stdout: out } = await simulate(
      ...args,
      '--strategies',
      'exponential,full-jitter',
    );
    expect(code).toBe(0);
    const result = JSON.parse(out) as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(['scenario', 'params', 'strategies']);
    expect(result.scenario).toBe('contention');
    expect(result.params).toEqual({
      clients: 20,
      trials: 5,
      seed: 7,
      netMeanMs: 10,
      netSdMs: 2,
      baseMs: 5,
      capMs: 2000,
      factor: 2,
      jitter: 0.1,
      randomMs: 1000,
    });
    const strategies = result.strategies as { strategy: string; calls: number; timeMs: number }[];
    expect(strategies.map((s) => s.strategy)).toEqual(['exponential', 'full-jitter']);
    for (const s of strategies) {
      expect(Object.keys(s)).toEqual(['strategy', 'calls', 'timeMs']);
      expect(s.calls).toBeGreaterThanOrEqual(20);
      expect(s.timeMs).toBeGreaterThan(0);
    }
    // Same seed, same output.
    expect((await simulate(...args, '--strategies', 'exponential,full-jitter')).stdout).toBe(out);
  });

  it('outage: recovered, recoveryMs, peak concurrency and every second, all strategies by default', async () => {
    const { code, stdout: out } = await simulate(...quickOutage, '--json');
    expect(code).toBe(0);
    const result = JSON.parse(out) as {
      scenario: string;
      params: Record<string, unknown>;
      strategies: Record<string, unknown>[];
    };
    expect(result.scenario).toBe('outage');
    expect(result.params).toMatchObject({
      clients: 200,
      meanGapMs: 10_000,
      timeoutMs: 2000,
      backlog: 4097,
      client: 'requeue',
      stopAtMs: 15_000,
      stopForMs: 20_000,
      durationMs: 50_000,
      baseMs: 100,
      factor: 2.718,
      jitter: 0.1,
      capMs: 300_000,
      breaker: null,
      budget: null,
    });
    expect(result.strategies.map((s) => s.strategy)).toEqual([
      'fixed',
      'linear',
      'exponential',
      'full-jitter',
      'equal-jitter',
      'decorrelated-jitter',
      'google',
      'normal-jitter',
      'none',
    ]);
    for (const s of result.strategies) {
      expect(Object.keys(s)).toEqual([
        'strategy',
        'recovered',
        'recoveryMs',
        'serverRecovered',
        'serverRecoveryMs',
        'peakConcurrency',
        'perSecond',
      ]);
      expect(typeof s.recovered).toBe('boolean');
      expect(s.recovered ? typeof s.recoveryMs : s.recoveryMs).toBe(s.recovered ? 'number' : null);
      expect(s.serverRecovered ? typeof s.serverRecoveryMs : s.serverRecoveryMs).toBe(
        s.serverRecovered ? 'number' : null,
      );
      const seconds = s.perSecond as Record<string, number>[];
      expect(seconds).toHaveLength(50);
      expect(Object.keys(seconds[0]!)).toEqual(['t', 'ok', 'errors', 'timeouts', 'concurrency']);
    }
  });

  it('outage with the workers’ breaker and budget options, filled in by their own parsers', async () => {
    const { code, stdout: out } = await simulate(
      ...quickOutage,
      '--strategies',
      'fixed',
      '--breaker',
      '{"openMs":5000}',
      '--budget',
      '{"capacity":100}',
      '--json',
    );
    expect(code).toBe(0);
    const { params } = JSON.parse(out) as { params: Record<string, Record<string, unknown>> };
    expect(params.breaker).toMatchObject({ openMs: 5000, failureRate: 0.5, minimumRequests: 10 });
    expect(params.budget).toMatchObject({ kind: 'token-bucket', capacity: 100, timeoutCost: 10 });
  });
});

describe('requeue simulate --client seed004', () => {
  it("runs client.go's two strategies by default, with its factor; the server is back 3 s after the resume", async () => {
    const { code, stdout: out } = await simulate(
      '--scenario',
      'outage',
      '--client',
      'seed004',
      '--json',
    );
    expect(code).toBe(0);
    const result = JSON.parse(out) as {
      params: Record<string, unknown>;
      strategies: Record<string, unknown>[];
    };
    expect(result.params).toMatchObject({ client: 'seed004', factor: 2.71828, backlog: 4097 });
    expect(
      result.strategies.map((s) => [s.strategy, s.serverRecovered, s.serverRecoveryMs]),
    ).toEqual([
      ['fixed', false, null],
      ['exponential', true, 3000],
    ]);
  });

  it('the table says which client ran and when the server was back', async () => {
    const { code, stdout: out } = await simulate(
      ...quickOutage,
      '--client',
      'seed004',
      '--strategies',
      'exponential',
    );
    expect(code).toBe(0);
    expect(out).toMatch(/^client seed004: client\.go's rule/m);
    expect(out).toMatch(/^strategy\s+recovered\s+after\s+peak conc.*\s+server back$/m);
  });
});

describe('requeue simulate --protect', () => {
  it('adds a protected row after each bare one, and says in params how it protected', async () => {
    const { code, stdout: out } = await simulate(
      ...quickOutage,
      '--strategies',
      'fixed,exponential',
      '--protect',
      '--json',
    );
    expect(code).toBe(0);
    const result = JSON.parse(out) as {
      params: { protect: Record<string, Record<string, unknown>> };
      strategies: Record<string, unknown>[];
    };
    expect(result.strategies.map((s) => [s.strategy, s.protected])).toEqual([
      ['fixed', false],
      ['fixed', true],
      ['exponential', false],
      ['exponential', true],
    ]);
    expect(Object.keys(result.strategies[1]!)).toEqual([
      'strategy',
      'protected',
      'recovered',
      'recoveryMs',
      'serverRecovered',
      'serverRecoveryMs',
      'peakConcurrency',
      'perSecond',
    ]);
    expect(result.params.protect.breaker).toMatchObject({ openMs: 5_000, minimumRequests: 10 });
    expect(result.params.protect.budget).toMatchObject({ kind: 'token-bucket', onEmpty: 'delay' });
    expect(result.params.protect.limit).toMatchObject({ initial: 10, floor: 1, tolerance: 1.5 });
    expect(result.params.protect.concurrency).toBe(200);
    expect(result.params.protect.retryShare).toBe(0.5);
    // The bare rows are the run without --protect, unchanged.
    const bare = await simulate(...quickOutage, '--strategies', 'fixed,exponential', '--json');
    const bareRows = (JSON.parse(bare.stdout) as { strategies: Record<string, unknown>[] })
      .strategies;
    const { protected: _p, ...fixedBare } = result.strategies[0]!;
    expect(fixedBare).toEqual(bareRows[0]);
  });

  it('protects with the breaker and budget given', async () => {
    const { stdout: out } = await simulate(
      ...quickOutage,
      '--strategies',
      'fixed',
      '--protect',
      '--breaker',
      '{"openMs":5000}',
      '--json',
    );
    const { params } = JSON.parse(out) as { params: { protect: Record<string, unknown> } };
    expect(params.protect.breaker).toMatchObject({ openMs: 5000 });
    expect(params.protect.budget).toMatchObject({ capacity: 500 });
  });

  it('the table names the protected rows and what protected them', async () => {
    const { code, stdout: out } = await simulate(
      ...quickOutage,
      '--strategies',
      'fixed',
      '--protect',
    );
    expect(code).toBe(0);
    expect(out).toMatch(/^\+protect: breaker \{.*concurrency limit \(gradient\) from 10 \(1–200/m);
    expect(out).toMatch(/^fixed\s+no\s/m);
    expect(out).toMatch(/^fixed\+protect\s+(yes|no)\s/m);
  });
});

describe('requeue simulate --scenario fairness', () => {
  const quick = ['--scenario', 'fairness', '--big-jobs', '2000', '--small-keys', '3'];
  it('--json: the parameters, the small keys alone, and per dispatch order their delays and every key’s', async () => {
    const { code, stdout: out } = await simulate(...quick, '--json');
    expect(code).toBe(0);
    const result = JSON.parse(out) as {
      scenario: string;
      params: Record<string, unknown>;
      smallAlone: Record<string, number>;
      dispatches: Record<string, unknown>[];
    };
    expect(Object.keys(result)).toEqual(['scenario', 'params', 'smallAlone', 'dispatches']);
    expect(result.params).toEqual({
      seed: 7,
      concurrency: 16,
      bigJobs: 2000,
      smallKeys: 3,
      smallJobs: 100,
      smallAtMs: 1000,
      serviceMs: 100,
    });
    expect(Object.keys(result.smallAlone)).toEqual(['p50Ms', 'p99Ms', 'maxMs']);
    expect(result.dispatches.map((d) => d.dispatch)).toEqual(['fifo', 'fair']);
    for (const d of result.dispatches) {
      expect(Object.keys(d)).toEqual(['dispatch', 'small', 'smallP99Ratio', 'makespanMs', 'keys']);
      expect((d.keys as { key: string }[]).map((k) => k.key)).toEqual([
        'big',
        'small-1',
        'small-2',
        'small-3',
      ]);
    }
    const [fifo, fair] = result.dispatches as { smallP99Ratio: number }[];
    expect(fair!.smallP99Ratio).toBeLessThan(fifo!.smallP99Ratio);
    expect((await simulate(...quick, '--json')).stdout).toBe(out);
  });

  it('the table: one row per dispatch order, then each key', async () => {
    const { code, stdout: out } = await simulate(...quick, '--dispatch', 'fair');
    expect(code).toBe(0);
    expect(out).toMatch(/^dispatch\s+small p50\s+small p99\s+p99 × alone\s+big p50/m);
    expect(out).toMatch(/^fair\s/m);
    expect(out).not.toMatch(/^fifo\s/m);
    expect(out).toMatch(/^small-3\s+100\s/m);
  });
});

describe('requeue simulate (tables)', () => {
  it('contention: one row per strategy and which did least work and finished first', async () => {
    const { code, stdout: out } = await simulate(
      '--scenario',
      'contention',
      '--clients',
      '20',
      '--trials',
      '5',
      '--strategies',
      'none,full-jitter',
    );
    expect(code).toBe(0);
    const lines = out.trimEnd().split('\n');
    expect(lines[1]).toMatch(/^strategy\s+calls\s+per client\s+time$/);
    expect(lines[2]).toMatch(/^none\s/);
    expect(lines[3]).toMatch(/^full-jitter\s/);
    expect(lines[4]).toMatch(/^least work: full-jitter .*; first done: /);
  });

  it('outage: the verdicts and a timeline', async () => {
    const { code, stdout: out } = await simulate(
      ...quickOutage,
      '--strategies',
      'fixed,exponential',
    );
    expect(code).toBe(0);
    expect(out).toMatch(/^strategy\s+recovered\s+after\s+peak conc/m);
    expect(out).toMatch(/^fixed\s+(yes|no)\s/m);
    expect(out).toMatch(/^t \(s\)\s+fixed\s+exponential$/m);
  });
});

describe('requeue simulate --svg', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('writes an SVG plot', async () => {
    dir = await mkdtemp(join(tmpdir(), 'requeue-simulate-'));
    const file = join(dir, 'contention.svg');
    const args = ['--scenario', 'contention', '--clients', '10', '--trials', '2', '--svg', file];
    const { code } = await simulate(...args);
    expect(code).toBe(0);
    const svg = await readFile(file, 'utf8');
    expect(svg).toMatch(/^<svg/);
    expect(svg).toContain('full-jitter');
  });
});

describe('requeue simulate: bad flags', () => {
  it.each([
    [[], /^requeue: --scenario: required/],
    [
      ['--scenario', 'storm'],
      /^requeue: --scenario: expected contention or outage or fairness, got "storm"/,
    ],
    [
      ['--scenario', 'contention', '--strategies', 'fixed,bogus'],
      /^requeue: --strategies: unknown strategy "bogus"/,
    ],
    [['--scenario', 'contention', '--clients', '0'], /^requeue: --clients: must be ≥ 1/],
    [['--scenario', 'contention', '--trials', '1.5'], /^requeue: --trials: expected an integer/],
    [['--scenario', 'contention', '--seed', 'x'], /^requeue: --seed: expected a number/],
    [
      ['--scenario', 'contention', '--timeout-ms', '100'],
      /^requeue: --timeout-ms: only for --scenario outage/,
    ],
    [
      ['--scenario', 'outage', '--trials', '3'],
      /^requeue: --trials: only for --scenario contention/,
    ],
    [['--scenario', 'outage', '--breaker', '{oops'], /^requeue: --breaker: not valid JSON/],
    [
      ['--scenario', 'outage', '--budget', '{"capacity":-1}'],
      /^requeue: --budget: budget\.capacity: /,
    ],
    [
      ['--scenario', 'outage', '--base-ms', '500', '--cap-ms', '100'],
      /^requeue: --cap-ms \(capMs\): /,
    ],
    [['--scenario', 'outage', '--duration-ms', '30000'], /^requeue: --duration-ms: must be longer/],
    [['--scenario', 'outage', '--mean-gap-ms', '0'], /^requeue: --mean-gap-ms: must be > 0/],
    [
      ['--scenario', 'outage', '--client', 'go'],
      /^requeue: --client: expected one of requeue, seed004, got "go"/,
    ],
    [
      ['--scenario', 'outage', '--client', 'seed004', '--strategies', 'fixed,full-jitter'],
      /^requeue: --strategies: --client seed004 retries by fixed or exponential only, got "full-jitter"/,
    ],
    [
      ['--scenario', 'contention', '--client', 'seed004'],
      /^requeue: --client: only for --scenario outage/,
    ],
    [['--scenario', 'contention', '--protect'], /^requeue: --protect: only for --scenario outage/],
    [
      ['--scenario', 'fairness', '--dispatch', 'fifo,drr'],
      /^requeue: --dispatch: unknown value "drr" \(one of fifo, fair\)/,
    ],
    [
      ['--scenario', 'fairness', '--strategies', 'fixed'],
      /^requeue: --strategies: not for --scenario fairness/,
    ],
    [
      ['--scenario', 'fairness', '--clients', '5'],
      /^requeue: --clients: only for --scenario contention or outage/,
    ],
    [['--scenario', 'fairness', '--concurrency', '0'], /^requeue: --concurrency: must be ≥ 1/],
    [['--scenario', 'fairness', '--service-ms', '0'], /^requeue: --service-ms: must be > 0/],
    [
      ['--scenario', 'fairness', '--big-jobs', '3000000', '--small-jobs', '1'],
      /^requeue: \(--big-jobs \(3000000\) \+ --small-keys \(10\) × --small-jobs \(1\)\) × runs \(3/,
    ],
    [['--scenario', 'fairness', '--svg', 'f.svg'], /^requeue: --svg: not for --scenario fairness/],
    [
      ['--scenario', 'outage', '--dispatch', 'fair'],
      /^requeue: --dispatch: only for --scenario fairness/,
    ],
    [['--scenario', 'outage', '--backlog', '-1'], /^requeue: --backlog: must be ≥ 0, got -1/],
    [['--scenario', 'outage', '--backlog', '1.5'], /^requeue: --backlog: expected an integer/],
  ])('%j → exit 2, one line naming the flag', async (args, message) => {
    const { code, stdout: out, stderr: err } = await simulate(...(args as string[]));
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toMatch(message);
    expect(err.trimEnd().split('\n')).toHaveLength(1);
  });
});

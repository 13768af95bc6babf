import { describe, expect, it } from 'vitest';
import { simulate, quickOutage } from './simulate-cli-helpers.js';

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

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { simulate, quickOutage } from './simulate-cli-helpers.js';

/**
 * `requeue simulate`: the fairness scenario, the tables, the SVG plot and bad
 * flags (the JSON of contention and outage runs is in `simulate-cli.test.ts`).
 */

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

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatMs } from '../../src/cli/commands/plan.js';
import { runCaptured } from '../harness/cli.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

interface JsonRetry {
  retry: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  cumulative: { p50: number; p99: number; mean: number };
  gaveUp?: number;
}

interface JsonPlan {
  policy: Record<string, unknown>;
  retries: JsonRetry[];
}

/** Runs `requeue plan …` in this process, capturing its output. */
const plan = (...args: string[]) => runCaptured('plan', ...args);

async function planJson(...args: string[]): Promise<JsonPlan> {
  const { code, stdout: out } = await plan(...args, '--json');
  expect(code).toBe(0);
  return JSON.parse(out) as JsonPlan;
}

describe('requeue plan --json', () => {
  it('prints exactly one JSON object with the policy and one row per retry', async () => {
    const result = await planJson(
      '--strategy',
      'equal-jitter',
      '--base-ms',
      '200',
      '--cap-ms',
      '5000',
      '--max-attempts',
      '4',
      '--samples',
      '1000',
    );
    expect(result.policy).toEqual({
      strategy: 'equal-jitter',
      baseMs: 200,
      capMs: 5000,
      factor: 2,
      jitter: 0.1,
      randomMs: 1000,
      maxAttempts: 4,
    });
    expect(Object.keys(result)).toEqual(['policy', 'retries']);
    expect(result.retries.map((r) => r.retry)).toEqual([0, 1, 2]);
    for (const r of result.retries) {
      expect(Object.keys(r)).toEqual([
        'retry',
        'min',
        'p50',
        'p90',
        'p99',
        'max',
        'mean',
        'cumulative',
      ]);
      for (const value of [
        r.min,
        r.p50,
        r.p90,
        r.p99,
        r.max,
        r.mean,
        r.cumulative.p50,
        r.cumulative.mean,
      ]) {
        // Rounded to 3 decimals.
        expect(Math.round(value * 1000) / 1000).toBe(value);
      }
    }
  });

  it('is repeatable with the default seed and changes with --seed', async () => {
    const a = await planJson('--samples', '2000');
    const b = await planJson('--samples', '2000');
    const c = await planJson('--samples', '2000', '--seed', '8');
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('adds gaveUp per retry with --max-elapsed-ms', async () => {
    const result = await planJson(
      '--strategy',
      'fixed',
      '--base-ms',
      '1000',
      '--max-attempts',
      '4',
      '--max-elapsed-ms',
      '2000',
      '--samples',
      '10',
    );
    expect(result.policy.maxElapsedMs).toBe(2000);
    expect(result.retries.map((r) => r.gaveUp)).toEqual([0, 0, 1]);
  });

  // The done criterion: over 100 000 samples, the mean of every retry
  // is within 1 % of the formula for full-jitter, equal-jitter and exponential.
  it.each([
    { strategy: 'full-jitter', formula: 'e/2', mean: (e: number) => e / 2 },
    { strategy: 'equal-jitter', formula: '3e/4', mean: (e: number) => (3 * e) / 4 },
    { strategy: 'exponential', formula: 'e', mean: (e: number) => e },
  ])(
    'gives $strategy means within 1 % of $formula over 100 000 samples',
    async ({ strategy, mean }) => {
      const result = await planJson(
        '--strategy',
        strategy,
        '--base-ms',
        '100',
        '--cap-ms',
        '10000',
        '--max-attempts',
        '9',
        '--samples',
        '100000',
      );
      expect(result.retries).toHaveLength(8);
      for (const r of result.retries) {
        const expected = mean(Math.min(10_000, 100 * 2 ** r.retry));
        expect(Math.abs(r.mean - expected)).toBeLessThanOrEqual(0.01 * expected);
      }
    },
  );
});

describe('requeue plan (table)', () => {
  it('prints a policy summary, a header and one aligned row per retry', async () => {
    const { code, stdout: out } = await plan(
      '--strategy',
      'exponential',
      '--base-ms',
      '500',
      '--cap-ms',
      '60000',
      '--max-attempts',
      '5',
      '--samples',
      '100',
    );
    expect(code).toBe(0);
    const lines = out.trimEnd().split('\n');
    expect(lines).toHaveLength(2 + 4);
    expect(lines[0]).toMatch(
      /^exponential baseMs=500 capMs=60000 factor=2 maxAttempts=5 \(4 retries/,
    );
    expect(lines[1]?.trim().split(/\s{2,}/)).toEqual([
      'retry',
      'min',
      'p50',
      'p90',
      'p99',
      'max',
      'mean',
      'cum p50',
      'cum p99',
      'cum mean',
    ]);
    expect(lines[2]?.trim().split(/\s+/)).toEqual([
      '0',
      ...Array(6).fill('500ms'),
      '500ms',
      '500ms',
      '500ms',
    ]);
    expect(lines[5]?.trim().split(/\s+/)).toEqual([
      '3',
      ...Array(6).fill('4.0s'),
      '7.5s',
      '7.5s',
      '7.5s',
    ]);
    const widths = new Set(lines.slice(1).map((line) => line.length));
    expect(widths.size).toBe(1);
  });

  it('formats durations as ms, s, m and h', () => {
    expect(formatMs(0)).toBe('0ms');
    expect(formatMs(850.4)).toBe('850ms');
    expect(formatMs(1200)).toBe('1.2s');
    expect(formatMs(90_000)).toBe('1.5m');
    expect(formatMs(7_200_000)).toBe('2.0h');
  });
});

describe('requeue plan usage errors (in process)', () => {
  it.each([
    [['--base-ms', 'abc'], 'requeue: --base-ms: expected a number, got "abc"'],
    [['--cap-ms', '10', '--base-ms', '100'], 'requeue: --cap-ms (capMs): capMs must be ≥ baseMs'],
    [['--strategy', 'nope'], 'requeue: --strategy (strategy): '],
    [['--max-attempts', '0'], 'requeue: --max-attempts (maxAttempts): '],
    [['--max-attempts', '1.5'], 'requeue: --max-attempts (maxAttempts): '],
    [['--jitter', '2'], 'requeue: --jitter (jitter): '],
    [['--factor', 'Infinity'], 'requeue: --factor: expected a number, got "Infinity"'],
    [['--samples', '0'], 'requeue: --samples: '],
    [['--seed', 'x'], 'requeue: --seed: expected a number, got "x"'],
  ])('%j exits 2 with one line naming the flag', async (args, message) => {
    const result = await plan(...args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.startsWith(message)).toBe(true);
    expect(result.stderr.endsWith('\n')).toBe(true);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});

describe('requeue plan as a child process', () => {
  function spawnPlan(...args: string[]) {
    return spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'plan', ...args], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 20_000,
    });
  }

  it.each([
    [['--base-ms', 'abc', '--json'], 'requeue: --base-ms: expected a number, got "abc"\n'],
    [
      ['--cap-ms', '10', '--base-ms', '100', '--json'],
      'requeue: --cap-ms (capMs): capMs must be ≥ baseMs\n',
    ],
  ])('%j exits 2 with one stderr line and no stack trace', (args, expected) => {
    const child = spawnPlan(...args);
    expect(child.status).toBe(2);
    expect(child.stdout).toBe('');
    expect(child.stderr).toBe(expected);
    expect(child.stderr).not.toMatch(/\n\s+at /);
  });

  it('prints the JSON plan and exits 0', () => {
    const child = spawnPlan(
      '--strategy',
      'google',
      '--max-attempts',
      '3',
      '--samples',
      '1000',
      '--json',
    );
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const result = JSON.parse(child.stdout) as JsonPlan;
    expect(result.policy.strategy).toBe('google');
    expect(result.retries).toHaveLength(2);
  });
});

describe('requeue plan --preset webhook', () => {
  it('shows the webhook schedule: 9 retries, more than 24 h in all', async () => {
    const result = await planJson('--preset', 'webhook', '--samples', '2000');
    expect(result.policy).toMatchObject({ strategy: 'schedule', maxAttempts: 10 });
    const steps = [1, 5, 30, 300, 1_800, 7_200, 18_000, 36_000, 36_000].map((s) => s * 1000);
    expect(result.retries).toHaveLength(steps.length);
    result.retries.forEach((r, i) => {
      expect(r.min).toBeGreaterThanOrEqual(steps[i]! * 0.9);
      expect(r.max).toBeLessThanOrEqual(steps[i]! * 1.1);
    });
    expect(result.retries.at(-1)!.cumulative.p50).toBeGreaterThan(24 * 3_600_000);
  });

  it('lets a flag change the preset, and names an unknown preset', async () => {
    const fewer = await planJson('--preset', 'webhook', '--max-attempts', '3', '--samples', '100');
    expect(fewer.retries).toHaveLength(2);
    const unknown = await plan('--preset', 'stripe');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--preset: must be one of webhook, got "stripe"/);
  });
});

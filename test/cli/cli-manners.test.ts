import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../harness/child.js';

/** Runs the CLI to its end. */
function requeue(...args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' },
  });
}

describe('CLI manners', () => {
  it(
    'requeue simulate --json | head exits quietly (no EPIPE stack)',
    { timeout: 60_000 },
    async () => {
      // 75 kB of JSON, more than a pipe holds: the reader leaves after the first chunk, as head does.
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          'src/cli/main.ts',
          'simulate',
          '--scenario',
          'outage',
          '--strategies',
          'fixed,exponential,full-jitter',
          '--json',
        ],
        { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.once('data', () => child.stdout.destroy());
      const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
      expect(stderr).toBe('');
      expect(code).toBe(0);
    },
  );

  it.each([[['enqueue', 'q', '--dta', '{}']], [['worker', 'q', '--bogus']]])(
    'an unknown flag is reported before a missing one: %j',
    (args) => {
      const result = requeue(...args);
      expect(result.status).toBe(2);
      expect(result.stderr).toMatch(/^error: unknown option '--(dta|bogus)'/);
      expect(result.stderr).not.toContain('required option');
    },
  );

  it('still names a missing required option once the flags are known', () => {
    const result = requeue('enqueue', 'q');
    expect(result.status).toBe(2);
    expect(result.stderr.trim()).toBe("error: required option '--data <json>' not specified");
  });

  it.each([
    ['plan'],
    ['simulate'],
    ['worker'],
    ['enqueue'],
    ['dlq', 'list'],
    ['dlq', 'trim'],
    ['breaker', 'status'],
  ])('help texts format defaults one way: requeue %s --help', (...command) => {
    const result = requeue(...command, '--help');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('(default: ');
    // Not `(default 5)`, not `(default: "5")`.
    expect(result.stdout).not.toMatch(/\(default(?!:)/);
    expect(result.stdout).not.toContain('(default: "');
  });
});

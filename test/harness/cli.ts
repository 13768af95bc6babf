import { vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { redisUrl } from './redis.js';

/**
 * Runs the CLI in this process against the run's Redis and captures what it
 * prints (usage errors go to stderr; the exit code is what is checked).
 */
export async function cli(...args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const code = await runCli(['node', 'requeue', ...args, '--redis', redisUrl()]);
    return { code, stdout };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

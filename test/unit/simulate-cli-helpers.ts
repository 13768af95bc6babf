import { afterEach, beforeEach, vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';

/**
 * `requeue simulate` run in this process, its output captured, for the
 * simulate CLI's tests.
 */

export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

let stdout = '';
let stderr = '';

/** Captures stdout and stderr around each test of the file that calls it. */
export function captureOutput(): void {
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
}

/** Runs `requeue simulate …` in this process, capturing its output. */
export async function simulate(...args: string[]): Promise<Captured> {
  stdout = '';
  stderr = '';
  const code = await runCli(['node', 'requeue', 'simulate', ...args]);
  return { code, stdout, stderr };
}

export const quickOutage = ['--scenario', 'outage', '--clients', '200', '--duration-ms', '50000'];

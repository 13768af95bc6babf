import { vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { redisUrl } from './redis.js';

/** What the CLI printed and its exit code, run in this process. */
export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `requeue <args>` in this process, as given, capturing stdout and stderr. */
export async function runCaptured(...args: string[]): Promise<Captured> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await runCli(['node', 'requeue', ...args]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/**
 * Runs the CLI in this process against the run's Redis and captures what it
 * prints (usage errors go to stderr; the exit code is what is checked).
 */
export async function cli(...args: string[]): Promise<{ code: number; stdout: string }> {
  const { code, stdout } = await runCaptured(...args, '--redis', redisUrl());
  return { code, stdout };
}

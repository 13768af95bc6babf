import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import type { Redis } from 'ioredis';

/** What a benchmark ran on, for its results file. */
export interface Machine {
  uname: string;
  cpuModel: string;
  cores: number;
  node: string;
  redis: string;
  /** 1-minute load average when the run started: other work on the box skews figures. */
  loadAverage: number;
}

/** Describes this machine and the Redis server `redis` talks to. */
export async function describeMachine(redis: Redis): Promise<Machine> {
  const info = await redis.info('server');
  return {
    uname: run('uname', ['-a']),
    cpuModel: cpuModel(),
    cores: availableParallelism(),
    node: process.version,
    redis: /^redis_version:(.+)$/m.exec(info)?.[1]?.trim() ?? 'unknown',
    loadAverage: loadavg()[0] ?? 0,
  };
}

function cpuModel(): string {
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8');
    const model = /^model name\s*:\s*(.+)$/m.exec(text)?.[1]?.trim();
    if (model) return model;
  } catch {
    // Not Linux: fall back to what Node reports.
  }
  return cpus()[0]?.model ?? 'unknown';
}

function run(file: string, args: string[]): string {
  try {
    return execFileSync(file, args, { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

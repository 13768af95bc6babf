import type { Redis } from 'ioredis';
import {
  diffTally,
  serverCommandStats,
  type CommandTally,
  type SentCommandCounter,
} from './command-counter.js';

/** What a window of work cost, in Redis commands and CPU time. */
export interface CostSample {
  /** Commands this process's clients sent (a script call counts once). */
  sent: CommandTally;
  /** Commands the server executed, scripts' own calls included (`INFO commandstats`). */
  executed: CommandTally;
  /** CPU time of this process (user + system), in µs. */
  nodeCpuUs: number;
  /** CPU time of the Redis server (user + system, all threads), in µs. */
  redisCpuUs: number;
}

/**
 * Measures the cost of a window of work. The server-side figures are exact
 * only on a server no one else uses; the process's CPU time includes
 * whatever else the process does meanwhile (here: nothing).
 */
export class CostProbe {
  private before: { executed: CommandTally; redisCpuUs: number; cpu: NodeJS.CpuUsage } | undefined;

  constructor(
    private readonly admin: Redis,
    private readonly sent: SentCommandCounter,
  ) {}

  async start(): Promise<void> {
    const [executed, redisCpuUs] = await Promise.all([
      serverCommandStats(this.admin),
      redisCpu(this.admin),
    ]);
    this.before = { executed, redisCpuUs, cpu: process.cpuUsage() };
    this.sent.start();
  }

  async stop(): Promise<CostSample> {
    if (!this.before) throw new Error('CostProbe.stop() before start()');
    const cpu = process.cpuUsage(this.before.cpu);
    const sent = this.sent.stop();
    const [executed, redisCpuUs] = await Promise.all([
      serverCommandStats(this.admin),
      redisCpu(this.admin),
    ]);
    const diff = diffTally(this.before.executed, executed);
    diff.delete('info'); // the probe's own
    return {
      sent,
      executed: diff,
      nodeCpuUs: cpu.user + cpu.system,
      redisCpuUs: redisCpuUs - this.before.redisCpuUs,
    };
  }
}

/** The server's CPU time so far, in µs, from `INFO cpu`. */
async function redisCpu(redis: Redis): Promise<number> {
  const text = await redis.info('cpu');
  const seconds = (field: string): number =>
    Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0);
  return Math.round((seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6);
}

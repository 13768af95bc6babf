import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { repoRoot } from '../harness/child.js';

/** One message of a broker chaos run: 20 % fail 1–3 times, 2 % for good. */
export interface ChaosMessage {
  n: number;
  fail: number;
  permanent: boolean;
}

/** The messages of a run, from a seeded random. */
export function chaosMessages(count: number, random: () => number): ChaosMessage[] {
  return Array.from({ length: count }, (_, n) => {
    const r = random();
    if (r < 0.02) return { n, fail: 0, permanent: true };
    if (r < 0.22) return { n, fail: 1 + Math.floor(random() * 3), permanent: false };
    return { n, fail: 0, permanent: false };
  });
}

/** A consumer process (test/fixtures/broker-chaos-consumer.ts) that can be SIGKILLed and started again. */
export class ConsumerProcesses {
  private readonly children: (ChildProcess | undefined)[] = [];
  private started = 0;
  unexpectedExits = 0;

  constructor(private readonly env: Record<string, string>) {}

  /** Starts process `index` and waits until it consumes. */
  async start(index: number): Promise<void> {
    this.started += 1;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/broker-chaos-consumer.ts'],
      {
        cwd: repoRoot,
        env: { ...process.env, ...this.env, NAME: `c${index}-${this.started}` },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    this.children[index] = child;
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL' && signal !== 'SIGTERM' && code !== 0) this.unexpectedExits += 1;
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('ready')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`consumer exited early (${code})`)));
    });
  }

  /** SIGKILLs process `index` whatever it is doing, and starts it again. */
  async crash(index: number): Promise<void> {
    const child = this.children[index];
    if (child && child.exitCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    await this.start(index);
  }

  /** SIGTERMs every process and waits for them to end. */
  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async (child) => {
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}

/** Where each message ended: successes per message, dead ones by message, handler runs. */
export async function outcomes(
  redis: Redis,
  prefix: string,
  retryQueue: string,
): Promise<{ ok: Map<number, number>; dead: Map<number, string>; runs: number }> {
  const okHash = await redis.hgetall(`${prefix}:ok`);
  const ok = new Map(Object.entries(okHash).map(([n, c]) => [Number(n), Number(c)]));
  const dlq = new DeadLetterQueue(retryQueue, { connection: redis });
  const dead = new Map<number, string>();
  for (const record of await dlq.list({}, { limit: 100_000 })) {
    const body = JSON.parse(
      Buffer.from((record.data as { body: string }).body, 'base64').toString(),
    ) as { n: number };
    dead.set(body.n, record.reason);
  }
  const runs = Object.values(await redis.hgetall(`${prefix}:runs`)).reduce(
    (a, c) => a + Number(c),
    0,
  );
  return { ok, dead, runs };
}

/**
 * The real system one model run drives: a private redis-server (AOF on,
 * fsync on every write) shared by the runs of the suite, a queue per run,
 * and 1–2 child worker processes that can be SIGKILLed and restarted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createQueue, DeadLetterQueue, type RequeueQueue } from '../../src/index.js';
import { startRedisServer, type RedisServerHandle } from '../../src/redis/redis-server.js';
import { spawnTs, type TsChild } from '../harness/child.js';
import { modelKeys, type ModelJobData, type RunEntry } from './protocol.js';

/** What one run's workers are made with; generated with the commands. */
export interface RunConfig {
  workers: number;
  concurrency: number;
  maxAttempts: number;
  baseMs: number;
  /** Workers get a queue-wide breaker; the model may force it open and closed. */
  breaker: boolean;
  /** Where the workers put due retries (`createWorker`'s `retryOrder`). @defaultValue `'first'` */
  retryOrder?: 'first' | 'fifo';
  /**
   * One slot per dispatch key in each worker (`keyConcurrency` 1, keyed by the
   * dispatch key): a full key's jobs are parked (issue 22). Only without the
   * queue-wide breaker, whose key it would replace.
   */
  keySlots?: boolean;
}

export const capMs = 50;
export const attemptTimeoutMs = 300;
export const lockMs = 2000;
export const stalledMs = 1000;

/** The workers' breaker: it may trip on its own, but recovers fast. */
export const workerBreaker = {
  failureRate: 0.6,
  minimumRequests: 6,
  // A long window, so a status read finds outcomes in it.
  windowMs: 10_000,
  buckets: 5,
  openMs: 200,
  maxOpenMs: 400,
  halfOpenRetryMs: 50,
  isolatedRetryMs: 200,
  probeTimeoutMs: 1000,
  flushIntervalMs: 50,
};

/** The user status reads run as: it may read and run scripts, never write. */
export const readerUser = { username: 'model-reader', password: 'model-reader-pw' };

/** Starts the suite's Redis: AOF on, fsync on every write, so a SIGKILL loses nothing acknowledged. */
export async function startModelRedis(): Promise<RedisServerHandle> {
  return startRedisServer({ appendonly: true, args: ['--appendfsync', 'always'] });
}

/** Creates (again, after a restart) the read-only ACL user. */
export async function ensureReader(admin: Redis): Promise<void> {
  await admin.call(
    'ACL',
    'SETUSER',
    readerUser.username,
    'on',
    `>${readerUser.password}`,
    '~*',
    '&*',
    '+@read',
    '+@connection',
    '+@scripting',
    '+info',
    '+client',
    // TIME reads the server clock (windows are keyed by Redis time); it writes nothing.
    '+time',
    '-@write',
  );
}

function waitReady(child: TsChild, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = setInterval(() => {
      if (child.stdout().includes('ready')) {
        clearInterval(poll);
        resolve();
      } else if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
        clearInterval(poll);
        reject(new Error(`model worker exited before ready:\n${child.stderr().slice(-2000)}`));
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(poll);
        reject(new Error(`model worker not ready after ${timeoutMs} ms`));
      }
    }, 25);
  });
}

/** One run's queue, producer, DLQ handle and child workers. */
export class RealSystem {
  readonly name = `model-${randomUUID().slice(0, 8)}`;
  readonly keys = modelKeys(this.name);
  readonly queue: RequeueQueue<ModelJobData>;
  readonly dlq: DeadLetterQueue;
  readonly admin: Redis;
  private readonly children: (TsChild | undefined)[] = [];
  /** What happened, in order, for a failure's report. */
  readonly journal: string[] = [];
  private monitor: ChildProcess | undefined;
  private readonly monitored: string[] = [];

  constructor(
    readonly server: RedisServerHandle,
    readonly config: RunConfig,
  ) {
    this.admin = new Redis(server.url, { maxRetriesPerRequest: null });
    this.admin.on('error', () => undefined);
    this.queue = createQueue<ModelJobData>(this.name, { connection: server.url });
    this.dlq = new DeadLetterQueue(this.name, { connection: server.url });
  }

  get policy() {
    return {
      strategy: 'full-jitter',
      baseMs: this.config.baseMs,
      capMs,
      maxAttempts: this.config.maxAttempts,
    };
  }

  async start(): Promise<void> {
    await ensureReader(this.admin);
    await this.watch();
    await Promise.all(Array.from({ length: this.config.workers }, (_, i) => this.spawn(i)));
  }

  private async spawn(index: number, env: Record<string, string> = {}): Promise<void> {
    const child = spawnTs('test/fixtures/model-worker.ts', [], {
      REDIS_URL: this.server.url,
      QUEUE: this.name,
      CONCURRENCY: String(this.config.concurrency),
      POLICY: JSON.stringify(this.policy),
      ATTEMPT_TIMEOUT_MS: String(attemptTimeoutMs),
      LOCK_MS: String(lockMs),
      STALLED_MS: String(stalledMs),
      RETRY_ORDER: this.config.retryOrder ?? 'first',
      ...(this.config.breaker ? { BREAKER: JSON.stringify(workerBreaker) } : {}),
      ...(this.config.keySlots && !this.config.breaker ? { KEY_SLOTS: '1' } : {}),
      ...env,
    });
    this.children[index] = child;
    await waitReady(child);
    this.journal.push(`worker ${index} started (pid ${child.proc.pid}) ${JSON.stringify(env)}`);
  }

  /** SIGKILLs child `index` and starts a new one; returns the seqs it had run. */
  async crash(index: number, env: Record<string, string> = {}): Promise<Set<number>> {
    const child = this.children[index];
    const pid = child?.proc.pid;
    await child?.kill('SIGKILL');
    const hit = new Set<number>();
    for (const run of await this.runs()) if (run.pid === pid) hit.add(run.seq);
    this.journal.push(`worker ${index} (pid ${pid}) SIGKILLed; it had run seqs ${[...hit]}`);
    await this.spawn(index, env);
    return hit;
  }

  /** Kills redis-server (SIGKILL) and starts it again from its AOF on the same port. */
  async restartRedis(during?: () => void): Promise<void> {
    during?.();
    await this.server.kill();
    await this.server.restart();
    await ensureReader(this.admin);
    await this.watch();
    this.journal.push('redis-server SIGKILLed and restarted');
  }

  /** Child workers that exited without being killed by {@link crash} or {@link stop} (a crash of ours). */
  unexpectedExits(): number {
    return this.children.filter(
      (c) => c !== undefined && (c.proc.exitCode !== null || c.proc.signalCode !== null),
    ).length;
  }

  /** Every handler execution recorded so far. */
  async runs(): Promise<RunEntry[]> {
    return (await this.admin.smembers(this.keys.runs)).map((raw) => JSON.parse(raw) as RunEntry);
  }

  /** A connection as the read-only user. */
  reader(): Redis {
    const redis = new Redis(this.server.url, {
      ...readerUser,
      maxRetriesPerRequest: null,
    });
    redis.on('error', () => undefined);
    return redis;
  }

  /** Any child's stderr, for a failure's report. */
  stderr(): string {
    return this.children
      .map((c, i) => (c && c.stderr().trim() ? `worker ${i}: ${c.stderr().slice(-1500)}` : ''))
      .filter(Boolean)
      .join('\n');
  }

  /**
   * With MODEL_MONITOR set (`--monitor`): every command Redis runs (scripts'
   * inner commands too) recorded from here on, for a failure's report
   * ({@link monitorLog}); a new monitor after each restart.
   */
  private async watch(): Promise<void> {
    if (!process.env.MODEL_MONITOR) return;
    this.monitor?.kill('SIGKILL');
    // redis-cli's own MONITOR: ioredis's can take a line for a reply under load.
    const monitor = spawn('redis-cli', ['-p', String(this.server.port), 'monitor'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let rest = '';
    monitor.stdout.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (this.monitored.length < 200_000) this.monitored.push(line);
    });
    // Recording from its first line on (`OK`).
    await new Promise<void>((resolve) => {
      const ready = () =>
        rest.startsWith('OK') || this.monitored.length > 0 ? resolve() : undefined;
      monitor.stdout.on('data', ready);
      monitor.once('exit', () => resolve());
    });
    this.monitor = monitor;
  }

  /** What MODEL_MONITOR recorded, the lines naming `needle` (all when none). */
  monitorLog(needle?: string): string[] {
    return needle ? this.monitored.filter((l) => l.includes(needle)) : this.monitored;
  }

  /** Kills the children, closes the handles and empties Redis for the next run. */
  async stop(): Promise<void> {
    this.monitor?.kill('SIGKILL');
    await Promise.all(this.children.map((c) => c?.kill('SIGKILL')));
    await Promise.allSettled([this.queue.close(), this.dlq.close()]);
    await this.admin.flushall();
    this.admin.disconnect();
  }
}

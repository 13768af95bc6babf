import { readOnlyBullQueue } from '../../scheduler/bullmq/bull-queue.js';
import type { Command } from 'commander';
import { parseBreakerOptions } from '../../policy/breaker/breaker-options.js';
import { breakerStateView } from '../../policy/breaker/breaker-state.js';
import { BreakerStore } from '../../redis/breaker-store.js';
import type { RedisClient } from '../../redis/connection.js';
import { discoverQueues } from '../../redis/queue-discovery.js';
import { queueCounts } from '../../scheduler/queue.js';
import { queueBreakerKey } from '../../scheduler/requeue-worker.js';
import { type RedisFlags, withCliRedis, withRedisOption } from '../connection-flag.js';
import { formatTable } from '../table.js';

/** One line of `requeue queues`: what `--json` prints per queue. */
export interface QueueSummary {
  queue: string;
  /** Waiting jobs, BullMQ's 'prioritized' included. */
  waiting: number;
  active: number;
  delayed: number;
  dead: number;
  /** Workers connected now (BullMQ's CLIENT LIST, by connection name). */
  workers: number;
  /** The queue-wide breaker's phase: `closed`, `open` or `half-open`. */
  breaker: string;
  /** Whether that breaker was opened by hand (`requeue breaker open`) and stays open. */
  isolated: boolean;
}

/** `requeue queues [--json]` */
export function registerQueues(program: Command): void {
  withRedisOption(
    program
      .command('queues')
      .description(
        'List every queue on the Redis with its job counts, workers and breaker (read-only)',
      )
      .option(
        '--json',
        'print an array of {queue, waiting, active, delayed, dead, workers, breaker, isolated}',
      ),
  ).action(async (opts: RedisFlags & { json?: boolean }) => {
    await withCliRedis(opts, async (redis) => {
      const summaries: QueueSummary[] = [];
      for (const name of await discoverQueues(redis)) summaries.push(await summarize(redis, name));
      if (opts.json) {
        process.stdout.write(JSON.stringify(summaries) + '\n');
        return;
      }
      if (summaries.length === 0) {
        process.stdout.write('no queues\n');
        return;
      }
      process.stdout.write(
        formatTable(
          ['QUEUE', 'WAITING', 'ACTIVE', 'DELAYED', 'DEAD', 'WORKERS', 'BREAKER'],
          summaries.map((s) => [
            s.queue,
            String(s.waiting),
            String(s.active),
            String(s.delayed),
            String(s.dead),
            String(s.workers),
            s.isolated ? `${s.breaker} (isolated)` : s.breaker,
          ]),
          { align: ['left', 'right', 'right', 'right', 'right', 'right', 'left'] },
        ),
      );
    });
  });
}

/** One queue's counts, workers and breaker. Reads only. */
async function summarize(redis: RedisClient, name: string): Promise<QueueSummary> {
  const queue = readOnlyBullQueue(name, redis);
  try {
    const [counts, workers, breaker] = await Promise.all([
      queueCounts(queue, name, redis),
      queue.getWorkersCount(),
      // The stored state is read as it is: these options play no part in a status read.
      new BreakerStore(redis, name, parseBreakerOptions({})).status(queueBreakerKey),
    ]);
    const shown = breakerStateView(breaker.state);
    return {
      queue: name,
      waiting: counts.waiting,
      active: counts.active,
      delayed: counts.delayed,
      dead: counts.dead,
      workers,
      breaker: shown.state,
      isolated: shown.isolated,
    };
  } finally {
    await queue.close();
  }
}

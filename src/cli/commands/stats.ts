import type { Command } from 'commander';
import { isCluster } from '../../redis/connection.js';
import { bullPrefix } from '../../redis/keys.js';
import { newBullQueue } from '../../scheduler/bullmq/bull-queue.js';
import { queueCounts } from '../../scheduler/queue.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { requireKnownQueue } from '../known-queue.js';

/** `requeue stats <queue> [--json]` */
export function registerStats(program: Command): void {
  withRedisOption(
    program
      .command('stats')
      .description('Count waiting, active, delayed, completed, failed and dead jobs')
      .argument('<queue>', 'queue name')
      .option('--json', 'print the counts as JSON'),
  ).action(async (queueName: string, opts) => {
    await withCliRedis(opts, async (redis) => {
      await requireKnownQueue(redis, queueName);
      // Looking never writes: a BullMQ Queue records its meta (version, event
      // stream length) when made, and would even create a typo's queue.
      const queue = newBullQueue(queueName, {
        connection: redis,
        prefix: bullPrefix(queueName, isCluster(redis)),
        skipMetasUpdate: true,
      });
      // A lost connection fails the count below; the queue need not re-emit it.
      queue.on('error', () => undefined);
      try {
        const counts = await queueCounts(queue, queueName, redis);
        if (opts.json) {
          process.stdout.write(JSON.stringify(counts) + '\n');
          return;
        }
        const width = Math.max(...Object.keys(counts).map((k) => k.length));
        for (const [state, n] of Object.entries(counts)) {
          process.stdout.write(`${state.padEnd(width)}  ${n}\n`);
        }
      } finally {
        await queue.close();
      }
    });
  });
}

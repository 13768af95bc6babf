import type { Command } from 'commander';
import { readOnlyBullQueue } from '../../scheduler/bullmq/bull-queue.js';
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
      const queue = readOnlyBullQueue(queueName, redis);
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

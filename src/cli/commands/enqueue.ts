import type { Command } from 'commander';
import { createQueue } from '../../scheduler/queue.js';
import { parseJsonFlag, parseNumberFlag } from '../cli-error.js';
import { limits } from '../../policy/limits.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import type { RetryPolicyInput } from '../../policy/retry-policy.js';

/** `requeue enqueue <queue> --data <json> [--name N] [--id KEY] [--policy JSON]` */
export function registerEnqueue(program: Command): void {
  withRedisOption(
    program
      .command('enqueue')
      .description('Add a job to a queue')
      .argument('<queue>', 'queue name')
      .requiredOption('--data <json>', 'the job payload, as JSON')
      .option('--name <name>', 'job name', 'job')
      .option('--id <idempotency-key>', 'idempotency key: a second enqueue with it is a no-op')
      .option('--policy <json>', 'retry policy for this job, as JSON')
      .option('--delay-ms <ms>', 'wait before the first attempt')
      .option('--json', 'print the result as JSON'),
  ).action(async (queueName: string, opts) => {
    const data = parseJsonFlag('--data', opts.data);
    const policy =
      opts.policy === undefined
        ? undefined
        : (parseJsonFlag('--policy', opts.policy) as RetryPolicyInput);
    await withCliRedis(opts, async (redis) => {
      const queue = createQueue(queueName, { connection: redis });
      try {
        const job = await queue.add(opts.name, data, {
          ...(opts.id !== undefined ? { idempotencyKey: opts.id } : {}),
          ...(policy !== undefined ? { policy } : {}),
          ...(opts.delayMs !== undefined
            ? {
                delayMs: parseNumberFlag('--delay-ms', opts.delayMs, {
                  integer: true,
                  min: 0,
                  max: limits.delayMs,
                }),
              }
            : {}),
        });
        if (opts.json) process.stdout.write(JSON.stringify({ queue: queueName, ...job }) + '\n');
        else {
          const key = job.key === undefined ? '' : ` (key ${job.key})`;
          process.stdout.write(`enqueued ${job.name} as ${job.id}${key} on ${queueName}\n`);
        }
      } finally {
        await queue.close();
      }
    });
  });
}

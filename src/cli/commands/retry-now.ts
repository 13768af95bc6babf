import type { Command } from 'commander';
import { isCluster } from '../../redis/connection.js';
import { bullPrefix } from '../../redis/keys.js';
import { retryJobNow } from '../../scheduler/retry-now.js';
import { CliUsageError, parseNumberFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { requireKnownQueue } from '../known-queue.js';

const said = {
  moved: 'is due now',
  'not-delayed': 'is not waiting for a retry; nothing to do',
  'attempt-moved-on': 'has moved on from that attempt; nothing done',
  parked: "is parked for its key's slot; nothing done",
  'not-found': 'is not in the queue',
} as const;

/** `requeue retry-now <queue> <jobId> [--attempt <n>]` */
export function registerRetryNow(program: Command): void {
  withRedisOption(
    program
      .command('retry-now')
      .description('Run a scheduled retry now (only while it is still that retry)')
      .argument('<queue>', 'queue name')
      .argument('<jobId>', 'job id or idempotency key')
      .option(
        '--attempt <n>',
        'the attempts started you saw (the jobs view); default: as it is now',
      )
      .option('--json', 'print {id, result, attemptsStarted} as JSON'),
  ).action(
    async (
      queue: string,
      jobId: string,
      opts: { attempt?: string; json?: boolean; redis?: string },
    ) => {
      const attemptsStarted =
        opts.attempt === undefined
          ? undefined
          : parseNumberFlag('--attempt', opts.attempt, { integer: true, min: 0, max: 1_000_000 });
      await withCliRedis(opts, async (redis) => {
        await requireKnownQueue(redis, queue);
        const outcome = await retryJobNow(redis, queue, jobId, {
          prefix: bullPrefix(queue, isCluster(redis)),
          ...(attemptsStarted !== undefined ? { attemptsStarted } : {}),
        });
        if (opts.json) process.stdout.write(JSON.stringify(outcome) + '\n');
        else if (outcome.result === 'not-found')
          throw new CliUsageError(`<jobId>: no job "${jobId}" in ${queue}`);
        else process.stdout.write(`${outcome.id} ${said[outcome.result]}\n`);
      });
    },
  );
}

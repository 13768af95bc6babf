import type { Command } from 'commander';
import { isResendError } from '../../errors/resend-error.js';
import { DeadLetterQueue } from '../../scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../scheduler/queue.js';
import { recoverEndpoint, resendMessage } from '../../../workers/webhook/recovery.js';
import { CliUsageError, parseNumberFlag, parseTimeFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { requireKnownQueue } from '../known-queue.js';
import { ProgressBar } from '../progress.js';
import { queueAndId, withQueueAndId } from './endpoint-args.js';

interface Flags {
  queue?: string;
  redis?: string;
  json?: boolean;
}

/**
 * `requeue endpoint resend <id> --message <msgId>` and `requeue endpoint
 * recover <id> --since <time> [--until <time>] [--dry-run]`: the library's
 * fenced moves (`workers/webhook/recovery.ts`).
 */
export function registerEndpointActions(endpoint: Command): void {
  withRedisOption(
    withQueueAndId(
      endpoint
        .command('resend')
        .description('Send a delivered message to an endpoint again, as a delivery of its own'),
    )
      .requiredOption('--message <msgId>', 'the message (event) id')
      .option('--json', 'print {endpointId, messageId, resend, deliveryId} as JSON'),
  ).action(
    async (first: string, second: string | undefined, flags: Flags & { message: string }) => {
      const { queue, id } = queueAndId(first, second, flags.queue);
      await withCliRedis(flags, async (redis) => {
        await requireKnownQueue(redis, queue);
        const q = createQueue(queue, { connection: redis });
        try {
          const resent = await resendMessage(q, id, flags.message, { redis }).catch((err) => {
            throw isResendError(err) ? new CliUsageError(err.message) : err;
          });
          process.stdout.write(
            flags.json
              ? JSON.stringify(resent) + '\n'
              : `resent ${flags.message} to ${id} (resend ${resent.resend}): delivery ${resent.deliveryId}\n`,
          );
        } finally {
          await q.close();
        }
      });
    },
  );

  withRedisOption(
    withQueueAndId(
      endpoint
        .command('recover')
        .description(
          "Bring back an endpoint's dead deliveries since a time, behind live traffic, rate-limited",
        ),
    )
      .requiredOption('--since <time>', 'deliveries dead at or after this time (ISO date or ms)')
      .option('--until <time>', 'and before this time (ISO date or ms)')
      .option('--dry-run', 'only count them')
      .option('--rate <n>', 'deliveries moved back per second (default 100)')
      .option('--json', 'print the result as JSON'),
  ).action(
    async (
      first: string,
      second: string | undefined,
      flags: Flags & { since: string; until?: string; dryRun?: boolean; rate?: string },
    ) => {
      const { queue, id } = queueAndId(first, second, flags.queue);
      const since = parseTimeFlag('--since', flags.since);
      const until = flags.until === undefined ? undefined : parseTimeFlag('--until', flags.until);
      if (until !== undefined && until <= since)
        throw new CliUsageError('--until: must be after --since');
      const ratePerSec =
        flags.rate === undefined
          ? undefined
          : parseNumberFlag('--rate', flags.rate, { min: 0.001, max: 1_000_000 });
      await withCliRedis(flags, async (redis) => {
        await requireKnownQueue(redis, queue);
        const dlq = new DeadLetterQueue(queue, { connection: redis });
        const bar = flags.dryRun || flags.json ? undefined : new ProgressBar('recover');
        const abort = new AbortController();
        const onSignal = (): void => abort.abort();
        process.once('SIGINT', onSignal);
        try {
          const result = await recoverEndpoint(dlq, id, {
            since,
            ...(until !== undefined ? { until } : {}),
            ...(flags.dryRun ? { dryRun: true } : {}),
            ...(ratePerSec !== undefined ? { ratePerSec } : {}),
            signal: abort.signal,
            ...(bar ? { onProgress: (p) => bar.update(p.done, p.total) } : {}),
          }).finally(() => bar?.finish());
          if (flags.json) process.stdout.write(JSON.stringify(result) + '\n');
          else if (result.dryRun)
            process.stdout.write(`${result.count} dead deliveries of ${id} would be recovered\n`);
          else
            process.stdout.write(
              `recovered ${result.done} of ${result.total} dead deliveries of ${id}` +
                (result.done < result.total ? ' (the rest were gone or dead again)' : '') +
                '\n',
            );
        } finally {
          process.off('SIGINT', onSignal);
          await dlq.close();
        }
      });
    },
  );
}

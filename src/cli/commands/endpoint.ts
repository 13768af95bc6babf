import type { Command } from 'commander';
import { EndpointStore } from '../../redis/endpoint-store.js';
import { CliUsageError } from '../cli-error.js';
import { listRegistered, registerEndpointRegistry } from './endpoint-registry.js';
import { registerEndpointActions } from './endpoint-actions.js';
import { defaultEndpointQueue, queueAndId, queueOf, withQueueAndId } from './endpoint-args.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { requireKnownQueue } from '../known-queue.js';
import type { RedisClient } from '../../redis/connection.js';
import { printTable, truncate } from '../table.js';
import { redactText, redactValue } from '../../util/redact.js';
import { redactOptionsFromEnv } from '../../config/env.js';

/**
 * `requeue endpoint list|enable|disable`: the webhook endpoints a queue will
 * not deliver to; `create|update|show|delete` (`endpoint-registry.ts`);
 * `resend|recover` (`endpoint-actions.ts`). Every one takes the queue either
 * way: `<queue> <id>` (the older positional form) or `<id> --queue <queue>`
 * (default `webhooks`; `endpoint-args.ts`).
 */
export function registerEndpoint(program: Command): void {
  const endpoint = program
    .command('endpoint')
    .description(
      'Create, update, show, delete, list, enable, disable, resend to and recover webhook endpoints',
    );
  registerEndpointRegistry(endpoint);
  registerEndpointActions(endpoint);

  withRedisOption(
    endpoint
      .command('list')
      .description('List the disabled endpoints of a queue, most recent first')
      .argument('[queue]', `webhook queue name (or --queue; default: ${defaultEndpointQueue})`)
      .option('--queue <queue>', 'webhook queue, as the positional one')
      .option('--json', 'print an array of {endpointId, reason, disabledAt} as JSON')
      .option('--registered', 'list the registered endpoints (URL, types, rate) instead'),
  ).action(async (positional: string | undefined, opts) => {
    const queue = queueOf(positional, opts.queue);
    if (opts.registered) return listRegistered(queue, opts);
    await withStore(opts, async (store, redis) => {
      await requireKnownQueue(redis, queue);
      const disabled = await store.list(queue);
      if (opts.json) {
        process.stdout.write(JSON.stringify(redactValue(disabled, redactOptionsFromEnv())) + '\n');
        return;
      }
      if (disabled.length === 0) {
        process.stdout.write('no disabled endpoints\n');
        return;
      }
      printTable(
        ['ENDPOINT', 'DISABLED AT', 'REASON'],
        disabled.map((d) => [
          d.endpointId,
          new Date(d.disabledAt).toISOString(),
          truncate(redactText(d.reason), 80),
        ]),
      );
    });
  });

  withRedisOption(
    withQueueAndId(
      endpoint
        .command('enable')
        .description(
          'Deliver to a disabled endpoint again (jobs already dead-lettered stay in the DLQ)',
        ),
      'endpointId',
    ),
  ).action(async (first: string, second: string | undefined, opts) => {
    const { queue, id: endpointId } = queueAndId(first, second, opts.queue, 'endpointId');
    await withStore(opts, async (store) => {
      const was = await store.enable(queue, endpointId);
      process.stdout.write(
        was ? `enabled ${endpointId}\n` : `${endpointId} was not disabled; nothing to do\n`,
      );
    });
  });

  withRedisOption(
    withQueueAndId(
      endpoint
        .command('disable')
        .description('Stop delivering to an endpoint: its jobs dead-letter as endpoint-disabled'),
      'endpointId',
    ).option('--reason <reason>', 'why, kept with the entry', 'disabled by an operator'),
  ).action(async (first: string, second: string | undefined, opts) => {
    const { queue, id: endpointId } = queueAndId(first, second, opts.queue, 'endpointId');
    if (typeof opts.reason !== 'string' || opts.reason.trim() === '') {
      throw new CliUsageError('--reason: must not be empty');
    }
    await withStore(opts, async (store) => {
      const fresh = await store.disable(queue, endpointId, opts.reason);
      process.stdout.write(
        fresh ? `disabled ${endpointId}\n` : `${endpointId} was already disabled; reason updated\n`,
      );
    });
  });
}

async function withStore<T>(
  opts: { redis?: string },
  fn: (store: EndpointStore, redis: RedisClient) => Promise<T>,
): Promise<T> {
  return withCliRedis(opts, async (redis) => {
    const store = new EndpointStore({ connection: redis, cacheTtlMs: 0 });
    try {
      return await fn(store, redis);
    } finally {
      await store.close();
    }
  });
}

import type { Command } from 'commander';
import { isEndpointRegistryError } from '../../errors/endpoint-registry-error.js';
import {
  endpointView,
  type EndpointFieldsInput,
  type EndpointUpdate,
} from '../../policy/endpoint-record.js';
import { EndpointRegistry } from '../../redis/endpoint-registry.js';
import { createEndpoint, updateEndpoint } from '../../../workers/webhook/endpoints.js';
import { CliUsageError, parseJsonFlag, parseNumberFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { printTable, truncate } from '../table.js';
import { queueAndId, withQueueAndId } from './endpoint-args.js';

interface FieldFlags {
  queue?: string;
  url?: string;
  types?: string;
  secret: string[];
  description?: string;
  header: string[];
  secretHeader: string[];
  rateLimit?: string;
  burst?: string;
  metadata: string[];
  policy?: string;
  allowPrivate?: boolean;
  json?: boolean;
  redis?: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** `name:value` or `key=value` pairs of a repeated flag, as a record. */
function pairs(flag: string, list: string[], separator: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of list) {
    const at = entry.indexOf(separator);
    if (at <= 0) throw new CliUsageError(`${flag}: expected name${separator}value, got "${entry}"`);
    out[entry.slice(0, at).trim()] = entry.slice(at + 1).trim();
  }
  return out;
}

/** The endpoint fields the flags give (only those given). */
function fieldsOf(flags: FieldFlags): EndpointUpdate {
  const fields: EndpointUpdate = {};
  if (flags.url !== undefined) fields.url = flags.url;
  if (flags.types !== undefined)
    fields.types = flags.types
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
  if (flags.secret.length > 0) fields.secrets = flags.secret;
  if (flags.description !== undefined) fields.description = flags.description;
  if (flags.header.length > 0) fields.headers = pairs('--header', flags.header, ':');
  if (flags.secretHeader.length > 0) fields.secretHeaders = flags.secretHeader;
  if (flags.metadata.length > 0) fields.metadata = pairs('--metadata', flags.metadata, '=');
  if (flags.policy !== undefined)
    fields.policy = parseJsonFlag('--policy', flags.policy) as EndpointUpdate['policy'];
  if (flags.rateLimit !== undefined) {
    const perSecond = parseNumberFlag('--rate-limit', flags.rateLimit, { min: 0 });
    fields.rateLimit = {
      perSecond,
      ...(flags.burst !== undefined
        ? { burst: parseNumberFlag('--burst', flags.burst, { integer: true, min: 1 }) }
        : {}),
    };
  } else if (flags.burst !== undefined) throw new CliUsageError('--burst: needs --rate-limit');
  return fields;
}

/** The flags `create` and `update` share. */
function withFieldFlags(command: Command): Command {
  return withRedisOption(
    command
      .option('--url <url>', 'http(s) URL deliveries are POSTed to')
      .option('--types <list>', 'event types it subscribes to, comma-separated; "a.*" for a prefix')
      .option(
        '--secret <secret>',
        'signing secret (whsec_…); repeat during a rotation',
        collect,
        [],
      )
      .option('--description <text>', 'what the endpoint is for')
      .option('--header <name:value>', 'a header sent with every delivery (repeat)', collect, [])
      .option(
        '--secret-header <name>',
        'a header whose value is a credential (repeat)',
        collect,
        [],
      )
      .option('--rate-limit <per-second>', 'deliveries per second, fleet-wide')
      .option('--burst <n>', 'deliveries at once after a quiet spell (with --rate-limit)')
      .option('--metadata <key=value>', 'a metadata entry (repeat)', collect, [])
      .option('--policy <json>', "this endpoint's retry policy, as JSON")
      .option('--allow-private', 'let the URL reach a private or loopback address')
      .option('--json', 'print the endpoint (secrets blanked) as JSON'),
  );
}

async function withRegistry<T>(
  opts: { redis?: string },
  fn: (registry: EndpointRegistry) => Promise<T>,
): Promise<T> {
  return withCliRedis(opts, async (redis) => {
    const registry = new EndpointRegistry({ connection: redis, cacheTtlMs: 0 });
    try {
      return await fn(registry);
    } catch (err) {
      if (isEndpointRegistryError(err)) throw new CliUsageError(err.message);
      throw err;
    } finally {
      await registry.close();
    }
  });
}

function printEndpoint(view: Record<string, unknown>, json: boolean | undefined): void {
  if (json) {
    process.stdout.write(JSON.stringify(view) + '\n');
    return;
  }
  for (const [field, value] of Object.entries(view))
    process.stdout.write(
      `${field}: ${typeof value === 'string' ? value : JSON.stringify(value)}\n`,
    );
}

/**
 * `requeue endpoint create|update|show|delete <id>` and `list <queue>
 * --registered`: registered endpoints and their subscriptions. Secrets and
 * secret headers are never printed.
 */
export function registerEndpointRegistry(endpoint: Command): void {
  withFieldFlags(
    withQueueAndId(
      endpoint
        .command('create')
        .description('Register a webhook endpoint: URL, secrets, subscribed types, rate limit'),
    ),
  ).action(async (first: string, second: string | undefined, flags: FieldFlags) => {
    const { queue, id } = queueAndId(first, second, flags.queue);
    if (flags.url === undefined) throw new CliUsageError('--url: required');
    const fields = fieldsOf(flags) as EndpointFieldsInput;
    await withRegistry(flags, async (registry) => {
      const record = await createEndpoint(registry, queue, id, fields, {
        allowPrivate: flags.allowPrivate === true,
      });
      if (flags.json) printEndpoint(endpointView(record), true);
      else process.stdout.write(`created ${id} in ${queue}\n`);
    });
  });

  withFieldFlags(
    withQueueAndId(
      endpoint
        .command('update')
        .description('Change the given fields of an endpoint (secrets: the whole list)'),
    ).option('--clear <fields>', 'fields to remove, comma-separated (e.g. rateLimit,types)'),
  ).action(
    async (first: string, second: string | undefined, flags: FieldFlags & { clear?: string }) => {
      const { queue, id } = queueAndId(first, second, flags.queue);
      const fields = fieldsOf(flags);
      for (const name of (flags.clear ?? '').split(',').filter(Boolean))
        (fields as Record<string, unknown>)[name.trim()] = null;
      if (Object.keys(fields).length === 0)
        throw new CliUsageError('nothing to change: give a flag');
      await withRegistry(flags, async (registry) => {
        const record = await updateEndpoint(registry, queue, id, fields, {
          allowPrivate: flags.allowPrivate === true,
        });
        if (flags.json) printEndpoint(endpointView(record), true);
        else process.stdout.write(`updated ${id} in ${queue}\n`);
      });
    },
  );

  withRedisOption(
    withQueueAndId(
      endpoint
        .command('show')
        .description('Print one endpoint (secrets and secret headers blanked)'),
    ).option('--json', 'print it as JSON'),
  ).action(
    async (
      first: string,
      second: string | undefined,
      flags: { queue?: string; json?: boolean; redis?: string },
    ) => {
      const { queue, id } = queueAndId(first, second, flags.queue);
      await withRegistry(flags, async (registry) => {
        const record = await registry.get(queue, id);
        if (!record) throw new CliUsageError(`no endpoint "${id}" in ${queue}`);
        printEndpoint(endpointView(record), flags.json);
      });
    },
  );

  withRedisOption(
    withQueueAndId(
      endpoint
        .command('delete')
        .description('Remove an endpoint: its waiting deliveries dead-letter as endpoint-disabled'),
    ),
  ).action(
    async (
      first: string,
      second: string | undefined,
      flags: { queue?: string; redis?: string },
    ) => {
      const { queue, id } = queueAndId(first, second, flags.queue);
      await withRegistry(flags, async (registry) => {
        const removed = await registry.delete(queue, id);
        process.stdout.write(removed ? `deleted ${id}\n` : `no endpoint "${id}"; nothing to do\n`);
      });
    },
  );
}

/** `requeue endpoint list <queue> --registered`: the registered endpoints, one row each. */
export async function listRegistered(
  queue: string,
  opts: { json?: boolean; redis?: string },
): Promise<void> {
  await withRegistry(opts, async (registry) => {
    const records = await registry.list(queue);
    if (opts.json) {
      process.stdout.write(JSON.stringify(records.map(endpointView)) + '\n');
      return;
    }
    if (records.length === 0) {
      process.stdout.write('no registered endpoints\n');
      return;
    }
    printTable(
      ['ENDPOINT', 'URL', 'TYPES', 'RATE/S'],
      records.map((r) => [
        r.id,
        truncate(String(endpointView(r).url), 60),
        truncate((r.types ?? ['*']).join(','), 40),
        r.rateLimit ? String(r.rateLimit.perSecond) : '-',
      ]),
    );
  });
}

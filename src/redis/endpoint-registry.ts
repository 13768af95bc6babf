import { endpointPut } from './lua-commands-webhook.js';
import { ConfigError } from '../errors/config-error.js';
import { EndpointRegistryError } from '../errors/endpoint-registry-error.js';
import {
  endpointFieldsSchema,
  endpointIdSchema,
  endpointRecordSchema,
  endpointUpdateSchema,
  mergeEndpoint,
  type EndpointFieldsInput,
  type EndpointRecord,
  type EndpointUpdate,
} from '../policy/endpoint-record.js';
import { parseConfig } from '../util/parse-config.js';
import { systemClock, type Clock } from '../util/system.js';
import { resolveRedis, type RedisClient, type RedisLike } from './connection.js';
import { requeueKeys } from './keys.js';

/** Options of {@link EndpointRegistry}. */
export interface EndpointRegistryOptions {
  /** Redis URL or connection. @defaultValue `REDIS_URL`, else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /** How long {@link EndpointRegistry.cached} trusts a record it read, in ms. @defaultValue `1000` */
  cacheTtlMs?: number;
  /** Key prefix of requeue's own keys. @defaultValue `'requeue'` */
  prefix?: string;
  clock?: Clock;
}

/**
 * Registered webhook endpoints, per queue: one hash
 * `requeueKeys(queue).endpoints`, field = endpoint id (a hash field, never
 * a key name), value = the record as JSON, validated on the way in and back
 * out (`src/policy/endpoint-record.ts`). Writes are fenced: a create only
 * when the id is free, an update only over the record it read (one Lua
 * step), so two operators' updates never silently overwrite each other.
 * Disabling lives apart, in {@link EndpointStore}.
 */
export class EndpointRegistry {
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly cacheTtlMs: number;
  private readonly prefix: string;
  private readonly cache = new Map<
    string,
    { readAt: number; record: Promise<EndpointRecord | undefined> }
  >();

  constructor(options: EndpointRegistryOptions = {}) {
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    this.cacheTtlMs = options.cacheTtlMs ?? 1_000;
    this.prefix = options.prefix ?? 'requeue';
  }

  /**
   * Registers an endpoint. @throws ConfigError naming a bad field
   * (`endpoint.url: must be an http(s) URL`); EndpointRegistryError when the id is taken.
   */
  async create(queue: string, id: string, fields: EndpointFieldsInput): Promise<EndpointRecord> {
    parseConfig(endpointIdSchema, id, 'endpoint.id');
    const now = this.clock.now();
    const valid = parseConfig(endpointFieldsSchema, fields, 'endpoint');
    const record = endpointRecordSchema.parse({ ...valid, id, createdAt: now, updatedAt: now });
    const written = await endpointPut(this.redis, this.key(queue), [
      id,
      '',
      JSON.stringify(record),
    ]);
    if (written !== 1)
      throw new EndpointRegistryError(`endpoint "${id}" already exists in ${queue}`, 'exists');
    this.cache.delete(`${queue}\n${id}`);
    return record;
  }

  /**
   * Changes the given fields (`null` clears an optional one), over the
   * record as read; a concurrent change makes it fail rather than be lost.
   */
  async update(queue: string, id: string, update: EndpointUpdate): Promise<EndpointRecord> {
    const changes = parseConfig(endpointUpdateSchema, update, 'endpoint') as EndpointUpdate;
    const raw = await this.redis.hget(this.key(queue), id);
    if (raw === null)
      throw new EndpointRegistryError(`no endpoint "${id}" in ${queue}`, 'not-found');
    const current = parseRecord(raw, id);
    const merged = mergeEndpoint(current, changes, this.clock.now());
    const record = parseConfig(endpointRecordSchema, merged, 'endpoint');
    const written = await endpointPut(this.redis, this.key(queue), [
      id,
      raw,
      JSON.stringify(record),
    ]);
    if (written !== 1)
      throw new EndpointRegistryError(
        `endpoint "${id}" changed while it was being updated; try again`,
        'conflict',
      );
    this.cache.delete(`${queue}\n${id}`);
    return record;
  }

  /** The endpoint's record, read now, or `undefined`. */
  async get(queue: string, id: string): Promise<EndpointRecord | undefined> {
    const raw = await this.redis.hget(this.key(queue), id);
    return raw === null ? undefined : parseRecord(raw, id);
  }

  /**
   * The record as read at most `cacheTtlMs` ago (one read per id however
   * many deliveries ask): what a delivery uses, so an update reaches every
   * worker within that time.
   */
  cached(queue: string, id: string): Promise<EndpointRecord | undefined> {
    const cacheKey = `${queue}\n${id}`;
    const now = this.clock.now();
    const hit = this.cache.get(cacheKey);
    if (hit && now - hit.readAt < this.cacheTtlMs) return hit.record;
    const record = this.get(queue, id);
    // A failed read is not kept: the next delivery asks again.
    record.catch(() => this.cache.delete(cacheKey));
    if (this.cache.size >= 10_000) this.cache.clear();
    this.cache.set(cacheKey, { readAt: now, record });
    return record;
  }

  /** Every endpoint of `queue`, by id. A record that no longer parses is skipped. */
  async list(queue: string): Promise<EndpointRecord[]> {
    const fields = await this.redis.hgetall(this.key(queue));
    const out: EndpointRecord[] = [];
    for (const [id, raw] of Object.entries(fields)) {
      try {
        out.push(parseRecord(raw, id));
      } catch {
        // Unreadable (written by a newer version?): left out of the listing, never thrown.
      }
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Removes the endpoint. Resolves `true` when it was there. */
  async delete(queue: string, id: string): Promise<boolean> {
    this.cache.delete(`${queue}\n${id}`);
    return (await this.redis.hdel(this.key(queue), id)) === 1;
  }

  /** Closes the connection if the registry opened it. */
  async close(): Promise<void> {
    if (this.owned) this.redis.disconnect();
  }

  private key(queue: string): string {
    return requeueKeys(queue, this.prefix).endpoints;
  }
}

function parseRecord(raw: string, id: string): EndpointRecord {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new ConfigError(`endpoint "${id}": stored record is not JSON`);
  }
  return parseConfig(endpointRecordSchema, value, `endpoint "${id}"`);
}

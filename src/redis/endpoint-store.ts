import type { RedisClient } from './connection.js';
import { z } from 'zod';
import { systemClock, type Clock } from '../util/system.js';
import { resolveRedis, type RedisLike } from './connection.js';
import { requeueKeys } from './keys.js';

/** A disabled endpoint, as listed. */
export interface DisabledEndpoint {
  endpointId: string;
  /** Why it was disabled (`410 Gone from https://…`, an operator's note). */
  reason: string;
  /** When, in ms since the epoch. */
  disabledAt: number;
}

/** The hash field's value; validated on the way back out. */
const storedSchema = z.object({ reason: z.string(), disabledAt: z.number() });

/** Options of {@link EndpointStore}. */
export interface EndpointStoreOptions {
  /** Redis URL or connection. @defaultValue `REDIS_URL`, else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /**
   * How long a copy of a queue's whole disabled set answers "enabled" before
   * it is read again, in ms. @defaultValue `1000`
   */
  cacheTtlMs?: number;
  /** Key prefix of requeue's own keys. @defaultValue `'requeue'` */
  prefix?: string;
  clock?: Clock;
}

interface Snapshot {
  readAt: number;
  disabled: Map<string, DisabledEndpoint>;
}

function parseEntry(endpointId: string, raw: string): DisabledEndpoint {
  try {
    const parsed = storedSchema.safeParse(JSON.parse(raw));
    if (parsed.success) return { endpointId, ...parsed.data };
  } catch {
    // Not JSON: fall through.
  }
  // A field is there, so the endpoint is disabled, whatever the value says.
  return { endpointId, reason: 'unreadable entry', disabledAt: 0 };
}

/**
 * Disabled webhook endpoints, per queue, in the hash
 * `requeueKeys(queue).disabledEndpoints` (field: endpoint id, value:
 * `{reason, disabledAt}` as JSON).
 *
 * The per-job check is cheap: the whole hash is read at most once per
 * `cacheTtlMs` per queue and shared by concurrent jobs. Only an answer of
 * "disabled" is confirmed with one HGET before it is acted on, so an
 * `enable` from anywhere (the CLI, another worker) takes effect at once,
 * while a `disable` made elsewhere shows up within `cacheTtlMs` (one done
 * here shows up at once). An endpoint that keeps failing for up to a second
 * longer costs a few requests; one re-enabled that keeps dead-lettering
 * jobs would cost them their delivery.
 */
export class EndpointStore {
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly cacheTtlMs: number;
  private readonly prefix: string;
  private readonly snapshots = new Map<string, Snapshot>();
  private readonly loading = new Map<string, Promise<Snapshot>>();

  constructor(options: EndpointStoreOptions = {}) {
    const { cacheTtlMs = 1000 } = options;
    if (!Number.isFinite(cacheTtlMs) || cacheTtlMs < 0) {
      throw new RangeError(`endpointStore.cacheTtlMs must be a number ≥ 0, got ${cacheTtlMs}`);
    }
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    this.cacheTtlMs = cacheTtlMs;
    this.prefix = options.prefix ?? 'requeue';
  }

  /**
   * Disables `endpointId` in `queue`; a second call replaces the reason and
   * time. Resolves `true` when it was not disabled before.
   */
  async disable(
    queue: string,
    endpointId: string,
    reason: string,
    at: number = this.clock.now(),
  ): Promise<boolean> {
    checkId(endpointId);
    const added = await this.redis.hset(
      this.key(queue),
      endpointId,
      JSON.stringify({ reason, disabledAt: at }),
    );
    this.snapshots.get(queue)?.disabled.set(endpointId, { endpointId, reason, disabledAt: at });
    return added === 1;
  }

  /** Enables `endpointId` in `queue` again. Resolves `true` when it was disabled. */
  async enable(queue: string, endpointId: string): Promise<boolean> {
    checkId(endpointId);
    const removed = await this.redis.hdel(this.key(queue), endpointId);
    this.snapshots.get(queue)?.disabled.delete(endpointId);
    return removed === 1;
  }

  /** The endpoint's disabled entry, or `undefined` when enabled (see the class note on caching). */
  async get(queue: string, endpointId: string): Promise<DisabledEndpoint | undefined> {
    const snapshot = await this.snapshot(queue);
    if (!snapshot.disabled.has(endpointId)) return undefined;
    const raw = await this.redis.hget(this.key(queue), endpointId);
    if (raw === null) {
      snapshot.disabled.delete(endpointId);
      return undefined;
    }
    const entry = parseEntry(endpointId, raw);
    snapshot.disabled.set(endpointId, entry);
    return entry;
  }

  /** Whether the endpoint is disabled (see {@link EndpointStore.get}). */
  async isDisabled(queue: string, endpointId: string): Promise<boolean> {
    return (await this.get(queue, endpointId)) !== undefined;
  }

  /** Every disabled endpoint of `queue`, read now, most recently disabled first. */
  async list(queue: string): Promise<DisabledEndpoint[]> {
    const snapshot = await this.read(queue);
    return [...snapshot.disabled.values()].sort(
      (a, b) => b.disabledAt - a.disabledAt || a.endpointId.localeCompare(b.endpointId),
    );
  }

  /** Closes the connection if the store opened it. */
  async close(): Promise<void> {
    if (this.owned) this.redis.disconnect();
  }

  private key(queue: string): string {
    return requeueKeys(queue, this.prefix).disabledEndpoints;
  }

  private async snapshot(queue: string): Promise<Snapshot> {
    const cached = this.snapshots.get(queue);
    if (cached && this.clock.now() - cached.readAt < this.cacheTtlMs) return cached;
    return this.read(queue);
  }

  /** Reads the hash, one read at a time per queue however many jobs ask. */
  private read(queue: string): Promise<Snapshot> {
    const pending = this.loading.get(queue);
    if (pending) return pending;
    const readAt = this.clock.now();
    const load = this.redis
      .hgetall(this.key(queue))
      .then((fields) => {
        const disabled = new Map<string, DisabledEndpoint>();
        for (const [id, raw] of Object.entries(fields)) disabled.set(id, parseEntry(id, raw));
        const snapshot = { readAt, disabled };
        this.snapshots.set(queue, snapshot);
        return snapshot;
      })
      .finally(() => this.loading.delete(queue));
    this.loading.set(queue, load);
    return load;
  }
}

function checkId(endpointId: string): void {
  if (endpointId === '') throw new RangeError('endpointId must not be empty');
}

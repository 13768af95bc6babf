/**
 * An endpoint's health as the webhook worker acts on it: a disabled one is
 * not called; one answering 410 is disabled at once (its job dead-letters
 * as `gone`); one whose deliveries have all failed for `afterMs` (5 days by
 * default, as Svix) is disabled with a reason, and its pending deliveries
 * wait — deferred `recheckMs` at a time, no attempt used — until it is
 * enabled or they run out of deferrals. Every disable is announced once it
 * is stored (`endpoint:disabled`, through `safeEmit`).
 *
 * The failing streak is one string per endpoint, `requeue:{q}:failing:<id>`
 * (its first failure in ms, about 80 bytes), set on a failure if absent,
 * deleted on a success, and expiring `afterMs` after the endpoint's last
 * failure: an endpoint that stops being called leaves nothing.
 */
import { z } from 'zod';
import type { Logger } from '../../src/config/logger.js';
import { DeferError } from '../../src/errors/defer-error.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import type { RedisClient } from '../../src/redis/connection.js';
import type { EndpointStore } from '../../src/redis/endpoint-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import type { Clock } from '../../src/util/system.js';
import { WebhookDeliveryError } from './delivery-error.js';

const day = 24 * 3600 * 1000;

/** Options of auto-disable, with their defaults. */
export const autoDisableSchema = z
  .strictObject({
    /** Disable an endpoint whose deliveries have all failed this long. @defaultValue 5 days */
    afterMs: z
      .number()
      .int()
      .min(1_000)
      .max(365 * day)
      .default(5 * day),
    /** A disabled endpoint's deliveries wait this long between checks. @defaultValue `600_000` */
    recheckMs: z.number().int().min(100).max(day).default(600_000),
  })
  .prefault({});
export type AutoDisableOptions = z.output<typeof autoDisableSchema>;
export type AutoDisableInput = z.input<typeof autoDisableSchema>;

/** The reason an auto-disabled endpoint carries: its deliveries wait rather than die. */
export const autoDisabledPrefix = 'auto-disabled:';

type DisabledEvent = WorkerEvents['endpoint:disabled'][0];

/** What {@link EndpointHealth} needs from its worker. */
export interface EndpointHealthContext {
  redis: RedisClient;
  queue: string;
  endpoints: EndpointStore;
  clock: Clock;
  logger: Logger;
  options: AutoDisableOptions | false;
  /** Announces a stored disable (the worker's `safeEmit`). */
  announce: (event: DisabledEvent) => void;
}

/** One worker's view of its endpoints' health. */
export class EndpointHealth {
  constructor(private readonly ctx: EndpointHealthContext) {}

  /** Throws when the endpoint must not be called: a `DeferError` (auto-disabled) or a dead-letter. */
  async check(endpointId: string): Promise<void> {
    const { endpoints, queue, clock, options } = this.ctx;
    const disabled = await endpoints.get(queue, endpointId);
    if (!disabled) return;
    const since = new Date(disabled.disabledAt).toISOString();
    const enable = `enable it with: requeue endpoint enable ${queue} ${endpointId}`;
    if (disabled.reason.startsWith(autoDisabledPrefix)) {
      const recheckMs =
        options === false ? autoDisableSchema.parse({}).recheckMs : options.recheckMs;
      throw new DeferError(
        `endpoint "${endpointId}" is disabled since ${since} (${disabled.reason}); its deliveries wait: ${enable}`,
        clock.now() + recheckMs,
      );
    }
    throw new PermanentError(
      `endpoint "${endpointId}" is disabled since ${since} (${disabled.reason}); ${enable}`,
      { deadReason: 'endpoint-disabled' },
    );
  }

  /** A delivery succeeded: the endpoint's failing streak ends (not awaited by the delivery). */
  succeeded(endpointId: string): void {
    if (this.ctx.options === false) return;
    this.ctx.redis.del(this.key(endpointId)).catch((err: unknown) => {
      this.ctx.logger.warn({ err, endpointId }, 'could not end the failing streak');
    });
  }

  /**
   * A delivery failed with `err`: what the handler should throw. A 410
   * disables the endpoint at once (awaited: its job dead-letters as `gone`);
   * any other failure extends the streak, which disables it past `afterMs`
   * (not awaited by the delivery).
   */
  async failed(endpointId: string, url: string, err: unknown): Promise<unknown> {
    const { endpoints, queue, clock, logger } = this.ctx;
    if (err instanceof WebhookDeliveryError && err.status === 410) {
      const origin = new URL(url).origin;
      const reason = `410 Gone from ${origin}`;
      const at = clock.now();
      if (await endpoints.disable(queue, endpointId, reason, at))
        this.ctx.announce({ queue, endpointId, reason, cause: 'gone', disabledAt: at });
      logger.warn({ endpointId }, 'endpoint answered 410 Gone; disabled it');
      return new PermanentError(
        `POST ${origin} answered 410 Gone; endpoint "${endpointId}" is now disabled`,
        { deadReason: 'gone', cause: err },
      );
    }
    this.streak(endpointId).catch((e: unknown) =>
      logger.warn({ err: e, endpointId }, 'could not record the failing streak'),
    );
    return err;
  }

  private async streak(endpointId: string): Promise<void> {
    const { redis, queue, endpoints, clock, options } = this.ctx;
    if (options === false) return;
    const now = clock.now();
    const key = this.key(endpointId);
    const reply = await redis
      .multi()
      .set(key, String(now), 'NX')
      .pexpire(key, options.afterMs)
      .get(key)
      .exec();
    const since = Number(reply?.[2]?.[1]);
    if (!Number.isFinite(since) || now - since < options.afterMs) return;
    const days = (options.afterMs / day).toFixed(1).replace(/\.0$/, '');
    const reason =
      `${autoDisabledPrefix} every delivery failed since ${new Date(since).toISOString()} ` +
      `(${days} day(s))`;
    if (!(await endpoints.disable(queue, endpointId, reason, now))) return;
    await redis.del(key);
    this.ctx.logger.warn({ endpointId, failingSince: since }, 'endpoint kept failing; disabled it');
    this.ctx.announce({
      queue,
      endpointId,
      reason,
      cause: 'failing',
      disabledAt: now,
      failingSince: since,
    });
  }

  private key(endpointId: string): string {
    return requeueKeys(this.ctx.queue).failingSince(endpointId);
  }
}

import type { RedisClient } from './connection.js';
import type { Logger } from '../config/logger.js';

/** A local copy of shared state kept current by pub/sub. */
export interface Follower {
  /** Stops listening and reloading. */
  stop(): void;
}

/**
 * Keeps a cache current from a pub/sub channel: each message (JSON) goes to
 * `onMessage`, and the whole state is reloaded at start, whenever the
 * subscriber (re)connects — a message may have been lost meanwhile — and
 * every `refreshMs` anyway. One shape for the breaker states and the key
 * pauses workers cache.
 */
export async function followChannel(options: {
  redis: RedisClient;
  channel: string;
  /** Applies one message; throwing marks it unreadable (logged, skipped). */
  onMessage: (message: unknown) => void;
  reload: () => Promise<void>;
  logger: Logger;
  /** Names the messages in the log. */
  what: string;
  refreshMs?: number;
}): Promise<Follower> {
  const subscriber = options.redis.duplicate();
  // Connection trouble: ioredis reconnects by itself, and the reload on 'ready' catches up.
  subscriber.on('error', () => undefined);
  subscriber.on('message', (_channel: string, raw: string) => {
    try {
      options.onMessage(JSON.parse(raw));
    } catch (err) {
      options.logger.warn({ err }, `unreadable ${options.what} message`);
    }
  });
  subscriber.on('ready', () => void options.reload());
  await subscriber.subscribe(options.channel);
  await options.reload();
  const timer = setInterval(() => void options.reload(), options.refreshMs ?? 5_000);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      subscriber.disconnect();
    },
  };
}

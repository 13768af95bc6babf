import { Redis } from 'ioredis';
import { ConfigError } from '../policy/validate.js';
import { redactText, redactUrl } from '../util/redact.js';

/**
 * Connects once, with a short deadline and no retries, before any worker
 * starts: a refused password or an unreachable Redis stops the start with one
 * line naming the setting (and never the password), instead of a worker
 * logging the refusal for ever.
 */
export async function checkRedis(url: string, label: string, timeoutMs = 5_000): Promise<void> {
  const probe = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: Error | undefined;
  probe.on('error', (err: Error) => {
    lastError = err;
  });
  try {
    await probe.connect();
    await probe.ping();
  } catch (err) {
    const cause = lastError ?? (err as Error);
    const reason = /WRONGPASS|NOAUTH|invalid password|AUTH/i.test(cause.message)
      ? `Redis refused the credentials (${cause.message.split(' ')[0]})`
      : `cannot reach Redis at ${redactUrl(url)} (${redactText(cause.message)})`;
    throw new ConfigError(`${label}: ${reason}`);
  } finally {
    probe.disconnect();
  }
}

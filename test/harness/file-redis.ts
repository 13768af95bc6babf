import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { connect } from './redis.js';

/**
 * A test file's own connection to the run's Redis, split across modules: the
 * file calls {@link connectForFile} once, and it and its helper modules read
 * {@link redis}, open from that call's beforeAll to its afterAll.
 */
export let redis: Redis;

/** Opens {@link redis} before the calling file's tests and closes it after them. */
export function connectForFile(): void {
  beforeAll(() => {
    redis = connect();
  });

  afterAll(() => {
    redis.disconnect();
  });
}

import { retryPolicySchema } from '../../src/policy/retry-policy.js';
import type { OutageParams } from '../../src/simulate/outage.js';

/**
 * Seed 004's outage as `requeue simulate --scenario outage` runs it by
 * default: 1000 clients, the server stopped from 15 s for 20 s, 180 s in all,
 * a Linux-default backlog of 4097, the chain from 100 ms (requeue's client).
 */
export const seed004Outage: OutageParams = {
  clients: 1000,
  seed: 7,
  meanGapMs: 10_000,
  timeoutMs: 2000,
  stopAtMs: 15_000,
  stopForMs: 20_000,
  durationMs: 180_000,
  server: {
    minDelayMs: 100,
    concurrencyLimit: 30,
    latencyFactor: 1.05,
    latencyK: 15,
    backlog: 4097,
  },
  policy: retryPolicySchema.parse({ baseMs: 100, capMs: 300_000, factor: 2.718, jitter: 0.1 }),
};

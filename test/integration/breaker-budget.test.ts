import { describe, expect, it } from 'vitest';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { DependencyError } from '../fixtures/breaker-dependency.js';
import { cleanedQueueName, connect } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import { queueFor, startWorker, readState, type Data } from './breaker-helpers.js';

/**
 * The retry budget against Redis: what a token bucket and a ratio budget
 * grant, what a retry costs and refunds through the worker, and what an empty
 * budget does (delay to the cap, or dead-letter).
 */

connectForFile();

describe('the retry budget', () => {
  it('a token bucket of 500 grants exactly 100 retries of cost 5, then denies', async () => {
    const name = cleanedQueueName(redis, 'brk-bucket');
    const options = parseBudgetOptions({ capacity: 500, retryCost: 5 });
    const conns = Array.from({ length: 10 }, () => connect());
    onCleanup(() => conns.forEach((c) => c.disconnect()));
    const now = Date.now();
    const granted = await Promise.all(
      Array.from({ length: 120 }, (_, i) =>
        new BudgetStore(conns[i % 10]!, name, options).take(5, now),
      ),
    );
    expect(granted.filter(Boolean)).toHaveLength(100);
    const budget = new BudgetStore(redis, name, options);
    expect(await budget.status(now)).toEqual({
      kind: 'token-bucket',
      tokens: 0,
      capacity: 500,
      denied: 20,
    });
    // Refunds never fill it past capacity.
    await budget.settle(10_000, 0, now);
    expect(await budget.status(now)).toMatchObject({ tokens: 500 });
  });

  it(
    'through the worker: a retry costs 5, a timeout retry 10, a success refunds 1 or the retry’s cost',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-refund');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      const seen: string[] = [];
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket' },
        // Long enough that the retry's refund cannot land before the tokens are read.
        policy: { strategy: 'fixed', baseMs: 500, capMs: 500, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const tokens = async () => {
        const status = await budget.status(Date.now());
        return status.kind === 'token-bucket' ? status.tokens : NaN;
      };
      const run = async (mode: Data['mode']) => {
        const scheduled =
          mode === 'ok'
            ? Promise.resolve()
            : new Promise<void>((resolve) => worker.once('retry:scheduled', () => resolve()));
        const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
        await queue.add('call', { mode });
        if (mode !== 'ok') {
          await scheduled;
          seen.push(`${mode} retrying: ${await tokens()}`);
        }
        await done;
        await worker.gate.flush();
        seen.push(`${mode} done: ${await tokens()}`);
      };

      await run('fail-once');
      await run('timeout-once');
      await budget.take(20, Date.now());
      await run('ok');
      expect(seen).toEqual([
        'fail-once retrying: 495',
        'fail-once done: 500',
        'timeout-once retrying: 490',
        'timeout-once done: 500',
        'ok done: 481',
      ]);
    },
  );

  it(
    'when empty with onEmpty delay-to-cap, a retry is pushed to the policy’s cap',
    { timeout: 30_000 },
    async () => {
      const name = cleanedQueueName(redis, 'brk-empty');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const exhausted: string[] = [];
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket', onEmpty: 'delay-to-cap' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      worker.on('budget:exhausted', (e) => exhausted.push(e.action));
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const scheduled = new Promise<number>((resolve) =>
        worker.once('retry:scheduled', (e) => resolve(e.delayMs)),
      );
      const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
      const { id } = await queue.add('call', { mode: 'fail-once' });
      expect(await scheduled).toBeGreaterThanOrEqual(300);
      expect(exhausted).toEqual(['delay-to-cap']);
      await done;
      const record = (await readState(name, id))!.history.find((r) => r.outcome === 'failed')!;
      expect(record).toMatchObject({ decision: 'retry', delaySource: 'budget' });
      expect(record.delayMs).toBeGreaterThanOrEqual(300);
      // The worker asked once and was denied once.
      expect(await budget.status(Date.now())).toMatchObject({ tokens: 0, denied: 1 });
    },
  );

  it(
    'a retry the empty budget denied refunds nothing when it succeeds',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-denied');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
      await queue.add('call', { mode: 'fail-once' });
      await done;
      await worker.gate.flush();
      const status = await budget.status(Date.now());
      // The retry took no token; its success must not hand back the 5 it never paid
      // (at most the 1 any success may refund).
      expect(status.kind === 'token-bucket' ? status.tokens : NaN).toBeLessThanOrEqual(1);
    },
  );

  it(
    'when empty with onEmpty dead-letter, the job dies with budget-exhausted',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-dead');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket', onEmpty: 'dead-letter' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const dead = new Promise<string>((resolve) =>
        worker.once('job:dead-lettered', (e) => resolve(e.record.reason)),
      );
      await queue.add('call', { mode: 'fail-once' });
      expect(await dead).toBe('budget-exhausted');
      expect((await queue.counts()).dead).toBe(1);
    },
  );

  it('a ratio budget of 0.1 with minRetries 0 grants exactly 10 retries per 100 requests', async () => {
    const name = cleanedQueueName(redis, 'brk-ratio');
    const options = parseBudgetOptions({ kind: 'ratio', ratio: 0.1, minRetries: 0 });
    const budget = new BudgetStore(redis, name, options);
    const now = Date.now();
    // No requests yet, no floor: nothing to grant.
    expect(await budget.take(1, now)).toBe(false);
    await budget.settle(0, 100, now);
    const granted: boolean[] = [];
    for (let i = 0; i < 20; i += 1) granted.push(await budget.take(1, now));
    expect(granted.filter(Boolean)).toHaveLength(10);
    expect(granted.slice(0, 10).every(Boolean)).toBe(true);
    expect(await budget.status(now)).toMatchObject({ kind: 'ratio', requests: 100, retries: 10 });
  });
});

/** Fails the first attempt as `job.data.mode` says (503, or a timeout), then succeeds. */
async function failingAsAsked(job: { attempt: number; data: Data }): Promise<string> {
  if (job.attempt === 1 && job.data.mode === 'fail-once') throw new DependencyError(503);
  if (job.attempt === 1 && job.data.mode === 'timeout-once') {
    throw new DOMException('the dependency did not answer in time', 'TimeoutError');
  }
  return 'ok';
}

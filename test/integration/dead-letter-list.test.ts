import { afterAll, describe, expect, it } from 'vitest';
import { DeadLetterQueue } from '../../src/scheduler/dead-letter.js';
import { onCleanup } from '../harness/cleanup.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';

const redis = connect();
afterAll(() => redis.disconnect());

/**
 * A DLQ list without a reason or name filter reads one page of the index
 * (ZREVRANGEBYSCORE … LIMIT) instead of scanning 1,000 records a page: the
 * dashboard polls it every few seconds. It must give what the scan gives.
 */
describe('listing dead jobs by time only', () => {
  it('pages newest first, within since/until, as the filtered scan does', async () => {
    const name = uniqueQueueName('dlq-list');
    onCleanup(() => cleanQueue(redis, name));
    for (let i = 1; i <= 7; i += 1)
      await seedDead(redis, {
        source: name,
        id: `d${i}`,
        name: 'job',
        data: { i },
        opts: {},
        reason: 'max-attempts',
        message: 'm',
        attempts: 1,
        history: [],
        deadAt: i * 1000,
        replays: 0,
      });
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    const ids = (records: { id: string }[]) => records.map((r) => r.id);
    const pages = [
      [{}, { offset: 1, limit: 2 }],
      [{ since: 2000, until: 6000 }, { limit: 10 }],
      [
        { since: 2000, until: 6000 },
        { offset: 3, limit: 10 },
      ],
      [{ until: 1000 }, {}],
      [{}, { offset: 7 }],
    ] as const;
    const fast = await Promise.all(pages.map(([f, p]) => dlq.list(f, p).then(ids)));
    expect(fast).toEqual([['d6', 'd5'], ['d5', 'd4', 'd3', 'd2'], ['d2'], [], []]);
    // The same pages through the scanning path (a name filter every record matches).
    const scanned = await Promise.all(
      pages.map(([f, p]) => dlq.list({ ...f, name: 'job' }, p).then(ids)),
    );
    expect(scanned).toEqual(fast);
    expect(await dlq.count({ since: 2000, until: 6000 })).toBe(4);
    // A page and its total in one go, by either path.
    for (const [f, p] of pages) {
      const expected = { total: await dlq.count(f), items: await dlq.list(f, p) };
      expect(await dlq.page(f, p)).toEqual(expected);
      expect(await dlq.page({ ...f, name: 'job' }, p)).toEqual(expected);
    }
    expect((await dlq.page({ name: 'other' })).total).toBe(0);
  });
});

describe('deaths in the same millisecond', () => {
  it('were listed in the order of their random ids, not the order they died', async () => {
    const name = uniqueQueueName('dlq-tie');
    onCleanup(() => cleanQueue(redis, name));
    // 'z' dies first, then 'a', in the same millisecond: the index alone orders them z, a.
    for (const id of ['z', 'a'])
      await seedDead(redis, {
        source: name,
        id,
        name: 'job',
        data: {},
        opts: {},
        reason: 'max-attempts',
        message: 'm',
        attempts: 1,
        history: [],
        deadAt: 5_000,
        replays: 0,
      });
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    expect((await dlq.list()).map((r) => r.id)).toEqual(['a', 'z']);
    expect((await dlq.list({ name: 'job' })).map((r) => r.id)).toEqual(['a', 'z']);
  });
});

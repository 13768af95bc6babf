import { afterAll, describe, expect, it } from 'vitest';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { onCleanup } from '../harness/cleanup.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, startRedisServer, uniqueQueueName } from '../harness/redis.js';

const redis = connect();
afterAll(() => redis.disconnect());

/** Seeds one dead job of `name` that died at `deadAt`. */
function seedAt(name: string, id: string, deadAt: number, data: unknown = {}): Promise<unknown> {
  return seedDeadOn(redis, name, id, deadAt, data);
}

/**
 * A DLQ list without a reason or name filter reads one page of the index
 * (ZREVRANGEBYSCORE … LIMIT) instead of scanning 1,000 records a page: the
 * dashboard polls it every few seconds. It must give what the scan gives.
 */
describe('listing dead jobs by time only', () => {
  it('pages newest first, within since/until, as the filtered scan does', async () => {
    const name = uniqueQueueName('dlq-list');
    onCleanup(() => cleanQueue(redis, name));
    for (let i = 1; i <= 7; i += 1) await seedAt(name, `d${i}`, i * 1000, { i });
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
    for (const id of ['z', 'a']) await seedAt(name, id, 5_000);
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    expect((await dlq.list()).map((r) => r.id)).toEqual(['a', 'z']);
    expect((await dlq.list({ name: 'job' })).map((r) => r.id)).toEqual(['a', 'z']);
  });

  // Found by a CI run: page 2 of 6 deaths that shared milliseconds held another
  // death than the same slice of the whole list. A page was cut from the index
  // (ties ordered by id) and only then sorted by generation.
  it('pages cut the whole list in the order the deaths happened, wherever their edges fall', async () => {
    const name = uniqueQueueName('dlq-tie-pages');
    onCleanup(() => cleanQueue(redis, name));
    // In death order; ids chosen so that the index's own order (by id) differs.
    const deaths: [string, number][] = [
      ['m', 1000],
      ['c', 1000],
      ['x', 1000],
      ['b', 2000],
      ['y', 2000],
      ['a', 3000],
      ['q', 3000],
      ['z', 3000],
      ['d', 3000],
    ];
    for (const [id, deadAt] of deaths) await seedAt(name, id, deadAt);
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    const ids = (records: { id: string }[]) => records.map((r) => r.id);
    const whole = deaths.map(([id]) => id).reverse();
    expect(ids(await dlq.list({}, { limit: 100 }))).toEqual(whole);
    for (let offset = 0; offset <= whole.length; offset += 1) {
      for (let limit = 1; limit <= 4; limit += 1) {
        const slice = whole.slice(offset, offset + limit);
        expect(
          ids(await dlq.list({}, { offset, limit })),
          `offset ${offset} limit ${limit}`,
        ).toEqual(slice);
        expect(ids(await dlq.list({ name: 'job' }, { offset, limit }))).toEqual(slice);
        expect(ids((await dlq.page({ name: 'job' }, { offset, limit })).items)).toEqual(slice);
      }
    }
    // Within a time range the same holds.
    expect(ids(await dlq.list({ since: 2000, until: 3000 }, { offset: 1, limit: 1 }))).toEqual([
      'b',
    ]);
  });

  it('a millisecond of deaths longer than a scan page still comes in death order', async () => {
    const name = uniqueQueueName('dlq-tie-scan');
    onCleanup(() => cleanQueue(redis, name));
    const count = 1_005;
    const order: string[] = [];
    for (let i = 0; i < count; i += 1) {
      // Ids whose order is not the deaths' order.
      const id = `j${String((i * 7919) % count).padStart(4, '0')}`;
      order.push(id);
    }
    for (const id of order) await seedAt(name, id, 7_000);
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    const whole = [...order].reverse();
    const ids = (records: { id: string }[]) => records.map((r) => r.id);
    expect(ids(await dlq.list({ name: 'job' }, { offset: 0, limit: 2_000 }))).toEqual(whole);
    expect(ids(await dlq.list({ name: 'job' }, { offset: 997, limit: 6 }))).toEqual(
      whole.slice(997, 1_003),
    );
    expect(ids(await dlq.list({}, { offset: 997, limit: 6 }))).toEqual(whole.slice(997, 1_003));
  }, 60_000);
});

describe('listing while jobs die', () => {
  it('a death landing between the page read and its count dropped records the list had read', async () => {
    // A Redis of its own: the deaths below would flood the MONITOR of the tests beside it.
    const server = await startRedisServer({ appendonly: false });
    onCleanup(() => server.kill());
    const reader = connect(server.url);
    onCleanup(() => reader.disconnect());
    const name = uniqueQueueName('dlq-race');
    for (let i = 1; i <= 5; i += 1) await seedDeadOn(reader, name, `old${i}`, i * 1000);
    const dlq = new DeadLetterQueue(name, { connection: reader });
    onCleanup(() => dlq.close());
    // Newer deaths keep landing, from another connection, while the list is read.
    const writer = connect(server.url);
    onCleanup(() => writer.disconnect());
    let dying = true;
    let n = 0;
    const deaths = (async () => {
      while (dying) {
        n += 1;
        await seedDeadOn(writer, name, `new${n}`, 1_000_000 + n);
      }
    })();
    const missing: string[][] = [];
    try {
      for (let round = 0; round < 200 && missing.length === 0; round += 1) {
        const ids = new Set((await dlq.list({}, { offset: 0, limit: 100_000 })).map((r) => r.id));
        const lost = [1, 2, 3, 4, 5].map((i) => `old${i}`).filter((id) => !ids.has(id));
        if (lost.length > 0) missing.push(lost);
      }
    } finally {
      dying = false;
      await deaths;
    }
    expect(n).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });
});

function seedDeadOn(
  client: typeof redis,
  name: string,
  id: string,
  deadAt: number,
  data: unknown = {},
): Promise<unknown> {
  return seedDead(client, {
    source: name,
    id,
    name: 'job',
    data,
    opts: {},
    reason: 'max-attempts',
    message: 'm',
    attempts: 1,
    history: [],
    deadAt,
    replays: 0,
  });
}

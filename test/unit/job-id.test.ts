import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  isProducerId,
  jobIdForKey,
  keyForJobId,
  keyIdPrefix,
  legacyJobIdForKey,
  lookupIds,
  replayIdFor,
} from '../../src/scheduler/job-id.js';
import { bullPrefix, requeueKeys } from '../../src/redis/keys.js';
import { bullKeySuffixes, requeueKeyNames, reservedNames } from '../harness/reserved-names.js';
import { jobIdAt, newJobId } from '../../src/util/system.js';

/** A fixed `random` argument: `n` bytes all equal to `byte`. */
const bytes = (byte: number, n = 11): Uint8Array => new Uint8Array(n).fill(byte);

describe('producer-side job ids (jobIdAt, newJobId)', () => {
  it('are 18 characters of a URL-safe alphabet without `:`', () => {
    const id = jobIdAt(Date.UTC(2026, 10, 23), bytes(0xab));
    expect(id).toHaveLength(18);
    expect(id).toMatch(/^[-0-9A-Z_a-z]{18}$/);
  });

  it('sort as their times do, whatever their random part', () => {
    const times = [Date.UTC(2001, 0, 1), Date.UTC(2026, 10, 23), Date.UTC(2026, 10, 23) + 1];
    times.push(Date.UTC(2026, 10, 23) + 64, Date.UTC(2099, 11, 31));
    const ids = times.map((ms, i) => jobIdAt(ms, bytes(i % 2 === 0 ? 0xff : 0x00)));
    expect([...ids].sort()).toEqual(ids);
    // The same millisecond: the random part orders them, the time part is shared.
    const a = jobIdAt(times[1]!, bytes(0x00));
    const b = jobIdAt(times[1]!, bytes(0xff));
    expect(a.slice(0, 7)).toBe(b.slice(0, 7));
    expect(a < b).toBe(true);
  });

  it('start with a letter from 1994 to 2109: never an integer (BullMQ refuses those), never `-`', () => {
    for (const ms of [Date.UTC(1994, 0, 1), Date.UTC(2026, 10, 23), Date.UTC(2109, 0, 1)]) {
      const id = jobIdAt(ms, bytes(0x30)); // every random character a digit
      expect(id[0]).toMatch(/[A-Za-z]/);
      expect(id).not.toMatch(/^\d+$/);
    }
  });

  it('take 6 bits from each random byte', () => {
    const ms = Date.UTC(2026, 10, 23);
    expect(jobIdAt(ms, bytes(0)).slice(7)).toBe('-'.repeat(11));
    expect(jobIdAt(ms, bytes(63)).slice(7)).toBe('z'.repeat(11));
    expect(jobIdAt(ms, bytes(64 + 1)).slice(7)).toBe('0'.repeat(11));
  });

  it('are unique across many, and distinct from any idempotency key’s id', () => {
    const ids = new Set(Array.from({ length: 100_000 }, () => newJobId()));
    expect(ids.size).toBe(100_000);
    for (const id of [...ids].slice(0, 100)) {
      expect(jobIdForKey(id)).not.toBe(id);
      expect(id.startsWith(keyIdPrefix[0]!)).toBe(false);
      expect(isProducerId(id)).toBe(true);
    }
  });
});

describe('a key’s job id (jobIdForKey) can never name a key BullMQ or requeue owns', () => {
  const suffixes = bullKeySuffixes();
  const names = reservedNames();

  it('reads BullMQ’s key names from the installed package (its QueueKeys list, its Lua scripts)', () => {
    for (const name of ['wait', 'active', 'paused', 'meta', 'id', 'events', 'marker', 'pc'])
      expect(suffixes).toContain(name);
    for (const name of ['stalled-check', 'prioritized', 'limiter', 'de', 'lock', 'logs'])
      expect(suffixes).toContain(name);
    expect(requeueKeyNames()).toEqual(expect.arrayContaining(['dead', 'dead-seq', 'breaker']));
  });

  it('no BullMQ key suffix of the pinned version starts as a key’s id does, nor is shaped like a producer id', () => {
    for (const suffix of suffixes) {
      expect(suffix.startsWith(keyIdPrefix[0]!), suffix).toBe(false);
      expect(isProducerId(suffix), suffix).toBe(false);
    }
  });

  it('every BullMQ and requeue key name, used as a key, maps to an id outside both key sets', () => {
    const queue = 'orders';
    for (const cluster of [false, true]) {
      const base = `${bullPrefix(queue, cluster)}:${queue}:`;
      const bullKeys = new Set(suffixes.map((s) => base + s));
      const rq = requeueKeys(queue);
      const ownKeys = new Set(Object.values(rq).map((v) => (typeof v === 'function' ? v('k') : v)));
      for (const name of names) {
        const id = jobIdForKey(name);
        expect(id).not.toContain(':');
        expect(bullKeys.has(base + id), name).toBe(false);
        // Keys BullMQ keeps below a job (`<id>:lock`…) stay below this id.
        for (const s of suffixes) expect(bullKeys.has(`${base}${id}:${s}`)).toBe(false);
        expect(ownKeys.has(rq.deadRecordPrefix + id), name).toBe(false);
        expect(keyForJobId(id)).toBe(name);
      }
    }
  });

  it('is injective, never holds `:`, never an integer, and keyForJobId inverts it (any key)', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.string({ minLength: 1 }),
        (a, b) => {
          const id = jobIdForKey(a);
          expect(id.startsWith(keyIdPrefix)).toBe(true);
          expect(id).not.toContain(':');
          expect(id).not.toMatch(/^\d+$/);
          expect(keyForJobId(id)).toBe(a);
          if (a !== b) expect(jobIdForKey(b)).not.toBe(id);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('is disjoint from every id of the earlier encoding, so an old job is never taken for a new key', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }), (key) => {
        const legacy = legacyJobIdForKey(key);
        expect(legacy.startsWith(keyIdPrefix)).toBe(false);
        expect(keyForJobId(legacy)).toBeUndefined();
      }),
      { numRuns: 2000 },
    );
    expect(legacyJobIdForKey('invoice:42')).toBe('invoice%3A42');
    expect(legacyJobIdForKey('42')).toBe('%342');
  });

  it('keyForJobId shows the key, and nothing for an id not made from a key', () => {
    expect(keyForJobId(jobIdForKey('invoice:42'))).toBe('invoice:42');
    expect(keyForJobId(jobIdForKey('100%'))).toBe('100%');
    expect(keyForJobId(newJobId())).toBeUndefined();
    expect(keyForJobId('invoice%3A42')).toBeUndefined();
    expect(keyForJobId(keyIdPrefix)).toBeUndefined();
    expect(keyForJobId(`${keyIdPrefix}a%zz`)).toBeUndefined();
  });

  it('lookups try the key’s id first, then the input as an id (never one with `:`), then the earlier id', () => {
    expect(lookupIds('invoice:42')).toEqual([jobIdForKey('invoice:42'), 'invoice%3A42']);
    expect(lookupIds('wait')).toEqual([jobIdForKey('wait'), 'wait']);
    const id = newJobId();
    expect(lookupIds(id)).toEqual([jobIdForKey(id), id]);
    expect(lookupIds(jobIdForKey('a:b'))).toContain(jobIdForKey('a:b'));
    expect(lookupIds('repeat:x').some((i) => i.includes(':'))).toBe(false);
    expect(lookupIds('')).toEqual([]);
  });

  it('a replayed job keeps a key’s or producer’s id; any other id gives way to its key’s id, or a fresh one', () => {
    const fresh = newJobId();
    const id = newJobId();
    expect(replayIdFor(id, undefined, fresh)).toBe(id);
    const keyed = jobIdForKey('order:42');
    expect(replayIdFor(keyed, 'order:42', fresh)).toBe(keyed);
    // An id of the earlier encoding moves into the namespace, found by its key.
    expect(replayIdFor('order%3A42', 'order:42', fresh)).toBe(keyed);
    expect(replayIdFor('%342', '42', fresh)).toBe(jobIdForKey('42'));
    // A dead record left by the old defect, named like a BullMQ key, never goes back there.
    for (const name of names) {
      expect(replayIdFor(name, name, fresh)).toBe(jobIdForKey(name));
      expect(replayIdFor(name, undefined, fresh)).toBe(fresh);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
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
    for (const id of [...ids].slice(0, 100)) expect(jobIdForKey(id)).toBe(id);
  });
});

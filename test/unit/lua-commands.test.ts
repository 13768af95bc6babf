/**
 * The typed Lua commands (issue 23, item 5): the script-name union is every
 * script in src/redis/lua/, and a reply of the wrong shape is one clear error
 * naming the script, not a cast that lies.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scriptNames } from '../../src/redis/lua-commands.js';
import { int, LuaReplyError, numeric, one, str, tuple } from '../../src/redis/lua-reply.js';
import { repoRoot } from '../harness/child.js';

describe('lua-commands', () => {
  it('names exactly the scripts in src/redis/lua/', () => {
    const onDisk = readdirSync(join(repoRoot, 'src/redis/lua'))
      .map((f) => /^([a-zA-Z]+)(?:-\d+)?\.lua$/.exec(f)?.[1])
      .filter((n): n is string => n !== undefined)
      .sort();
    expect([...scriptNames].sort()).toEqual(onDisk);
    expect(new Set(scriptNames).size).toBe(scriptNames.length);
  });

  it('reads a reply of the right shape', () => {
    expect(tuple('limitAcquire', [1, 2, '2.5', 3], [int, int, numeric, int], 'x')).toEqual([
      1, 2, 2.5, 3,
    ]);
    expect(one('pauseKey', 1, int, 'an integer')).toBe(1);
  });

  it.each([
    ['a wrong length', [1, 2, '2.5']],
    ['a wrong item type', [1, 'two', '2.5', 3]],
    ['not a list', 7],
    ['a non-numeric string', [1, 2, 'abc', 3]],
  ])('throws a LuaReplyError naming the script on %s', (_, reply) => {
    const read = () => tuple('limitAcquire', reply, [int, int, numeric, int], 'four');
    expect(read).toThrow(LuaReplyError);
    expect(read).toThrow(/Lua script limitAcquire replied .*expected \[four\]/);
  });

  it('refuses a string where an integer is expected', () => {
    expect(() => one('startLife', '1', int, 'an integer')).toThrow(/startLife/);
    expect(one('budgetRefund', '4', str, 'a string')).toBe('4');
  });
});

/**
 * Reading a Lua script's reply (`lua-commands.ts`): each item checked and
 * typed, a reply of the wrong shape one clear {@link LuaReplyError} naming
 * the script.
 */
/** A script answered with a reply of the wrong shape. */
export class LuaReplyError extends Error {
  constructor(script: string, expected: string, reply: unknown) {
    super(`requeue: Lua script ${script} replied ${describe(reply)}, expected ${expected}`);
    this.name = 'LuaReplyError';
  }
}

function describe(reply: unknown): string {
  try {
    return JSON.stringify(reply)?.slice(0, 120) ?? String(reply);
  } catch {
    return typeof reply;
  }
}

/** A reply item read as `what`, or the script's shape error. */
export type Read<T> = (value: unknown) => T | undefined;
export const int: Read<number> = (v) =>
  typeof v === 'number' && Number.isInteger(v) ? v : undefined;
export const str: Read<string> = (v) => (typeof v === 'string' ? v : undefined);
/** A number Redis sent as an integer or, to keep its fraction, as a string. */
export const numeric: Read<number> = (v) =>
  typeof v === 'number'
    ? v
    : typeof v === 'string' && v !== '' && !Number.isNaN(Number(v))
      ? Number(v)
      : undefined;
export const strOrInt: Read<string | number> = (v) => str(v) ?? int(v);
export const strings: Read<string[]> = (v) =>
  Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;

export type Reads<T extends unknown[]> = { [I in keyof T]: Read<T[I]> };

export function one<T>(name: string, reply: unknown, read: Read<T>, expected: string): T {
  const value = read(reply);
  if (value === undefined) throw new LuaReplyError(name, expected, reply);
  return value;
}

/** `reply` as a tuple of exactly `reads.length` items, each read by its reader. */
export function tuple<T extends unknown[]>(
  name: string,
  reply: unknown,
  reads: Reads<T>,
  expected: string,
): T {
  const shape = `[${expected}]`;
  if (!Array.isArray(reply) || reply.length !== reads.length)
    throw new LuaReplyError(name, shape, reply);
  return reads.map((read, i) => one(name, reply[i], read as Read<unknown>, shape)) as T;
}

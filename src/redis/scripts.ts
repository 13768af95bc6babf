import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RedisClient } from './connection.js';

/**
 * requeue's own Lua scripts, loaded from `src/redis/lua/` in one place. Each
 * runs atomically in Redis. They store and move state; what the state means
 * is decided in `src/policy/`.
 *
 * File names follow BullMQ's habit: `<name>-<numKeys>.lua`, or `<name>.lua`
 * when a call declares its own keys (the first argument counts them). A line
 * `--- @include "includes/<file>"` is replaced by that file's text, and
 * `--- @include "bullmq:includes/<file>"` by the text of BullMQ's own Lua
 * function of that name (`bullmq/dist/cjs/commands/includes/`), as BullMQ's
 * loader includes it: its own includes first, each file once per script.
 * That is how the dead-letter script does BullMQ's finalization with
 * BullMQ's code (`deadLetter-16.lua`), not a copy that drifts on an upgrade.
 */
const luaDir = fileURLToPath(new URL('./lua/', import.meta.url));

/** BullMQ's Lua sources, from the BullMQ this process loads. */
const bullmqLuaDir = join(dirname(createRequire(import.meta.url).resolve('bullmq')), 'commands');

interface ScriptDef {
  numberOfKeys: number | undefined;
  lua: string;
}

function loadScripts(): Record<string, ScriptDef> {
  const out: Record<string, ScriptDef> = {};
  for (const file of readdirSync(luaDir)) {
    const match = /^([a-zA-Z]+)(?:-(\d+))?\.lua$/.exec(file);
    if (!match) continue;
    const [, name, keys] = match;
    // A stale copy (a renamed script left in an old build) must not win silently.
    if (out[name!]) throw new Error(`requeue: two Lua scripts named ${name} in ${luaDir}`);
    out[name!] = {
      numberOfKeys: keys === undefined ? undefined : Number(keys),
      lua: withIncludes(readFileSync(luaDir + file, 'utf8'), luaDir, new Set()),
    };
  }
  return out;
}

/**
 * `lua` with its includes expanded, depth first; `dir` is where its own
 * includes are found, `seen` the files already in the script.
 */
function withIncludes(lua: string, dir: string, seen: Set<string>): string {
  return lua.replace(/^--- @include "(bullmq:)?([\w/-]+)"[ \t]*$/gm, (_, bull, path: string) => {
    const file = join(bull ? bullmqLuaDir : dir, `${path}.lua`);
    if (seen.has(file)) return '';
    seen.add(file);
    return withIncludes(readFileSync(file, 'utf8'), `${dirname(file)}/`, seen);
  });
}

let cache: Record<string, ScriptDef> | undefined;

/** Every script, by name (loaded once). */
export function scriptDefinitions(): Readonly<Record<string, ScriptDef>> {
  cache ??= loadScripts();
  return cache;
}

/** The prefix every requeue command gets on a connection, so it never clashes with BullMQ's. */
const commandPrefix = 'requeue_';

type Arg = string | number | Buffer;

/**
 * Runs script `name` with `keys` and `args`. The script is registered on the
 * connection once (EVALSHA, falling back to EVAL, as ioredis does).
 */
export async function runScript<T = unknown>(
  redis: RedisClient,
  name: string,
  keys: readonly Arg[],
  args: readonly Arg[],
): Promise<T> {
  return callScript<Promise<T>>(redis, redis, name, keys, args);
}

/**
 * Defines script `name` on `redis` so that transactions made from it after
 * this call can queue it (see {@link queueScript}).
 */
export function defineScript(redis: RedisClient, name: string): void {
  const def = scriptDefinitions()[name];
  if (!def) throw new Error(`requeue: no Lua script named ${name}`);
  const command = commandPrefix + name;
  if (!(command in redis)) redis.defineCommand(command, def);
}

/**
 * Queues script `name` on `transaction`, a MULTI (or pipeline) made from
 * `redis` after {@link defineScript}: it then runs in the same step as the
 * transaction's other commands (ioredis loads the script before the EXEC).
 */
export function queueScript(
  transaction: object,
  name: string,
  keys: readonly Arg[],
  args: readonly Arg[],
): void {
  callScript(transaction, undefined, name, keys, args);
}

function callScript<R>(
  target: object,
  redis: RedisClient | undefined,
  name: string,
  keys: readonly Arg[],
  args: readonly Arg[],
): R {
  if (redis) defineScript(redis, name);
  const def = scriptDefinitions()[name];
  if (!def) throw new Error(`requeue: no Lua script named ${name}`);
  const fn = (target as Record<string, ((...a: Arg[]) => R) | undefined>)[commandPrefix + name];
  if (!fn) throw new Error(`requeue: script ${name} is not defined on this connection`);
  if (def.numberOfKeys === undefined) return fn.call(target, keys.length, ...keys, ...args);
  if (keys.length !== def.numberOfKeys)
    throw new Error(`requeue: script ${name} takes ${def.numberOfKeys} keys, got ${keys.length}`);
  return fn.call(target, ...keys, ...args);
}

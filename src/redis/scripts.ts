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
 * A script composed at run time (a keyed add: BullMQ's own add script, then
 * requeue's `includes/fairStamp.lua`) is defined by {@link defineLua}.
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
  defineScript(redis, name);
  const def = scriptDefinitions()[name]!;
  const fn = (redis as unknown as Record<string, (...a: Arg[]) => Promise<T>>)[
    commandPrefix + name
  ]!;
  if (def.numberOfKeys === undefined) return fn.call(redis, keys.length, ...keys, ...args);
  if (keys.length !== def.numberOfKeys)
    throw new Error(`requeue: script ${name} takes ${def.numberOfKeys} keys, got ${keys.length}`);
  return fn.call(redis, ...keys, ...args);
}

/** Defines script `name` (a file's) on `redis`, once. */
function defineScript(redis: RedisClient, name: string): void {
  const def = scriptDefinitions()[name];
  if (!def) throw new Error(`requeue: no Lua script named ${name}`);
  const command = commandPrefix + name;
  if (!(command in redis)) redis.defineCommand(command, def);
}

/**
 * The text of requeue's Lua include `includes/<name>.lua`, its own includes
 * expanded: a part for a script composed at run time (see {@link defineLua}).
 */
export function luaInclude(name: string): string {
  return withIncludes(`--- @include "includes/${name}"`, luaDir, new Set());
}

/**
 * Defines on `redis`, once, a script composed at run time (`lua`, taken as
 * it is) under `name`, which no file in `src/redis/lua/` may have. Returns
 * the command's name on the connection: a MULTI made from `redis` after
 * this call can queue it too (ioredis loads the script before the EXEC).
 */
export function defineLua(
  redis: RedisClient,
  name: string,
  numberOfKeys: number,
  lua: () => string,
): string {
  const command = commandPrefix + name;
  if (command in redis) return command;
  if (scriptDefinitions()[name]) throw new Error(`requeue: a Lua file is named ${name} too`);
  redis.defineCommand(command, { numberOfKeys, lua: lua() });
  return command;
}

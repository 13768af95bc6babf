import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { RedisClient } from '../../redis/connection.js';
import { defineLua, luaInclude } from '../../redis/scripts.js';

/**
 * A keyed job's add in one script call: BullMQ's own `addPrioritizedJob` —
 * the text the installed BullMQ defines on its connections (its
 * `dist/cjs/scripts/`), never a copy — wrapped as a Lua function, then
 * requeue's fair stamp (`src/redis/lua/includes/fairStamp.lua`) on the same
 * keys, BullMQ's reply returned unchanged. BullMQ's `Job#addJob` makes the
 * call, through the stand-in {@link keyedAddClient}.
 *
 * What this relies on, which `test/integration/fair-add.test.ts` trips on if
 * an upgrade changes it: BullMQ adds a priority job with the script
 * `addPrioritizedJob` (9 keys, 'prioritized' the 4th and 'pc' the 9th; 3
 * arguments) through `runCommand('addPrioritizedJob:<version>', [...keys,
 * ...args])`, and a delayed one with `addDelayedJob`; the script's text has
 * no `#!` line (flags, which only a whole script may declare), returns the
 * job id as its last statement and needs nothing around it.
 */
const bullAdd = { name: 'addPrioritizedJob', keys: 9, args: 3 } as const;

/** The keyed add's keys: BullMQ's, then the fair set and the job's hash (see {@link composeFairAdd}). */
const fairAddKeys = bullAdd.keys + 2;

/** BullMQ's script module: what its loader defines on a connection. */
interface BullScript {
  name?: unknown;
  keys?: unknown;
  content?: unknown;
}

/** Why `script` cannot be wrapped as the keyed add needs, or `undefined`. */
export function bullAddProblem(script: BullScript | undefined): string | undefined {
  if (script?.name !== bullAdd.name || script.keys !== bullAdd.keys)
    return `is not the ${bullAdd.keys}-key ${bullAdd.name} requeue was written for`;
  if (typeof script.content !== 'string') return 'has no text';
  if (script.content.startsWith('#!')) return 'declares flags (a #! line)';
  return undefined;
}

/** BullMQ's `addPrioritizedJob`, as the BullMQ this process loads defines it. */
export function bullAddScript(): BullScript | undefined {
  const require = createRequire(import.meta.url);
  const file = join(
    dirname(require.resolve('bullmq')),
    'scripts',
    `${bullAdd.name}-${bullAdd.keys}.js`,
  );
  try {
    return (require(file) as Record<string, BullScript | undefined>)[bullAdd.name];
  } catch {
    return undefined;
  }
}

/**
 * The keyed add's Lua: BullMQ's script as the function `bullAdd` (first, so
 * none of requeue's names is in its scope), then, when it added or found the
 * job id requeue gave (not a refusal's negative code, not a deduplicated
 * job's id), the stamp. Keys: BullMQ's 9, then the fair set and the job's
 * hash; arguments: BullMQ's 3, then the job id, the dispatch key and its cost.
 */
export function composeFairAdd(): string {
  const script = bullAddScript();
  const problem = bullAddProblem(script);
  if (problem !== undefined)
    throw new Error(
      `requeue: BullMQ's ${bullAdd.name} script ${problem}; keyed adds need the BullMQ requeue was tested with`,
    );
  return `local function bullAdd()
${String(script!.content)}
end
${luaInclude('fairStamp')}
local jobId = bullAdd()
if jobId == ARGV[4] then
  fairStamp(KEYS[4], KEYS[9], KEYS[10], KEYS[11], jobId, ARGV[5], ARGV[6])
end
return jobId
`;
}

/** Defines the keyed add on `redis` (once): a transaction made from it after this can queue it. */
export function defineFairAdd(redis: RedisClient): string {
  return defineLua(redis, 'fairAdd', fairAddKeys, composeFairAdd);
}

type Arg = string | number | Buffer;

/** How BullMQ's `Job#addJob` reaches Redis: its client's, or a transaction's, `runCommand`. */
export interface CommandRunner {
  runCommand(name: string, args: Arg[]): unknown;
}

/** What the stamp needs beyond BullMQ's keys. */
export interface StampTarget {
  /** requeue's fair set (`requeue:{<queue>}:fair`). */
  fair: string;
  /** The job's hash (BullMQ's prefix + id). */
  job: string;
  id: string;
  dispatchKey: string;
  cost: number;
}

/**
 * A stand-in for BullMQ's client or transaction `bull`, for one keyed job's
 * `Job#addJob`: BullMQ's `addPrioritizedJob` becomes `command` (see
 * {@link defineFairAdd}) with the stamp's keys and arguments, a delayed add
 * (stamped when it is due, by nobody: it enters the set at the virtual
 * time) passes through, and any other command is refused before anything is
 * sent — a BullMQ that adds keyed jobs otherwise must not add them
 * unstamped without a word.
 */
export function keyedAddClient(
  bull: CommandRunner,
  command: string,
  stamp: StampTarget,
): CommandRunner {
  return {
    runCommand(name, args) {
      const script = name.slice(0, name.indexOf(':'));
      if (script === bullAdd.name) {
        if (args.length !== bullAdd.keys + bullAdd.args)
          throw new Error(
            `requeue: BullMQ's ${bullAdd.name} got ${args.length} keys and arguments, not ${bullAdd.keys + bullAdd.args}`,
          );
        const all = args.slice(0, bullAdd.keys);
        all.push(stamp.fair, stamp.job);
        for (let i = bullAdd.keys; i < args.length; i++) all.push(args[i]!);
        all.push(stamp.id, stamp.dispatchKey, stamp.cost);
        return bull.runCommand(command, all);
      }
      if (script === 'addDelayedJob') return bull.runCommand(name, args);
      throw new Error(
        `requeue: BullMQ added a keyed job with ${name}, not ${bullAdd.name} or addDelayedJob`,
      );
    },
  };
}

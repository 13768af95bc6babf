import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';

/** Calls per command name. */
export type CommandTally = Map<string, number>;

/** The sum of a tally's calls. */
export function totalCalls(tally: CommandTally): number {
  let total = 0;
  for (const calls of tally.values()) total += calls;
  return total;
}

/**
 * Counts the commands this process's ioredis clients send, by name, with a
 * Lua script call named after the script (`evalsha:moveToFinished`). These
 * are the client's commands — round trips, if none were pipelined — and
 * exclude what the scripts run inside Redis.
 *
 * It wraps `Redis.prototype.sendCommand` and `defineCommand`, so install it
 * before any connection defines its scripts.
 */
export class SentCommandCounter {
  private readonly scriptNames = new Map<string, string>();
  private tally: CommandTally = new Map();
  private counting = false;

  /** Wraps ioredis's prototype once for this process. */
  static install(): SentCommandCounter {
    const counter = new SentCommandCounter();
    const proto = Redis.prototype as unknown as RedisInternals;
    const send = proto.sendCommand;
    const define = proto.defineCommand;
    proto.sendCommand = function (this: Redis, command, ...rest) {
      if (counter.counting) counter.add(command);
      return send.call(this, command, ...rest);
    };
    proto.defineCommand = function (this: Redis, name, definition) {
      counter.scriptNames.set(createHash('sha1').update(definition.lua).digest('hex'), name);
      define.call(this, name, definition);
    };
    return counter;
  }

  /** Starts a fresh count. */
  start(): void {
    this.tally = new Map();
    this.counting = true;
  }

  /** Stops counting and returns what was sent since {@link start}. */
  stop(): CommandTally {
    this.counting = false;
    return this.tally;
  }

  private add(command: SentCommand): void {
    let name = command.name;
    if (name === 'evalsha' || name === 'eval') {
      const first = command.args[0];
      const sha = typeof first === 'string' ? first : '';
      name = `${name}:${this.scriptNames.get(sha) ?? sha.slice(0, 8)}`;
    }
    this.tally.set(name, (this.tally.get(name) ?? 0) + 1);
  }
}

interface SentCommand {
  name: string;
  args: unknown[];
}

interface RedisInternals {
  sendCommand(command: SentCommand, ...rest: unknown[]): unknown;
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
}

/**
 * Reads the server's `INFO commandstats`: every command it executed, those
 * run by Lua scripts included. On a shared server this counts other clients
 * too, so the figure is exact only on a private one.
 */
export async function serverCommandStats(redis: Redis): Promise<CommandTally> {
  const text = await redis.info('commandstats');
  const tally: CommandTally = new Map();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    tally.set(match[1]!, Number(match[2]));
  }
  return tally;
}

/** `after − before`, per name, dropping names that did not change. */
export function diffTally(before: CommandTally, after: CommandTally): CommandTally {
  const diff: CommandTally = new Map();
  for (const [name, calls] of after) {
    const delta = calls - (before.get(name) ?? 0);
    if (delta > 0) diff.set(name, delta);
  }
  return diff;
}

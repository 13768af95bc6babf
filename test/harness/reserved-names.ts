import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { requeueKeys } from '../../src/redis/keys.js';

/**
 * Every name BullMQ puts after `<prefix>:<queue>:` (or after a job's id), read
 * from the installed package rather than copied: `QueueKeys.getKeys`' list,
 * every `':name'` a Lua script appends to a key, and every literal the
 * classes pass to `toKey`. An upgrade that adds a key adds it here.
 */
export function bullKeySuffixes(): string[] {
  const require = createRequire(import.meta.url);
  const esm = join(dirname(require.resolve('bullmq/package.json')), 'dist', 'esm');
  const queueKeys = readFileSync(join(esm, 'classes', 'queue-keys.js'), 'utf8');
  const list = /getKeys\(name\)\s*{[^[]*\[([^\]]*)\]/.exec(queueKeys)?.[1];
  if (list === undefined) throw new Error('bullmq queue-keys.js: getKeys list not found');
  const names = new Set([...list.matchAll(/'([^']*)'/g)].map((m) => m[1]!).filter(Boolean));
  if (names.size < 10) throw new Error(`bullmq queue-keys.js: only ${names.size} names`);
  const commands = join(esm, 'commands');
  const lua = [
    ...readdirSync(commands).filter((f) => f.endsWith('.lua')),
    ...readdirSync(join(commands, 'includes')).map((f) => join('includes', f)),
  ].map((f) => readFileSync(join(commands, f), 'utf8'));
  for (const text of lua) for (const m of text.matchAll(/["']:([a-z][a-z-]*)/g)) names.add(m[1]!);
  const classes = join(esm, 'classes');
  for (const f of readdirSync(classes).filter((f) => f.endsWith('.js'))) {
    const text = readFileSync(join(classes, f), 'utf8');
    for (const m of text.matchAll(/toKey\(\s*[`'"]([a-z][a-z-]*)/g)) names.add(m[1]!);
    for (const m of text.matchAll(/\}:([a-z][a-z-]*)`/g)) names.add(m[1]!);
  }
  return [...names].sort();
}

/** The last segment of every key requeue keeps for a queue (`dead`, `dead-seq`, `breaker`…). */
export function requeueKeyNames(): string[] {
  const keys = requeueKeys('q');
  const names = new Set<string>();
  for (const value of Object.values(keys)) {
    const key = typeof value === 'function' ? value('k') : value;
    for (const part of key.split(':').slice(2)) if (/^[a-z-]+$/.test(part)) names.add(part);
  }
  return [...names].sort();
}

/** Both lists: every name a user's key must not be able to address. */
export function reservedNames(): string[] {
  return [...new Set([...bullKeySuffixes(), ...requeueKeyNames(), '', 'requeue', 'bull'])]
    .filter((n) => n !== '')
    .sort();
}

/** The Redis type of each BullMQ key of a queue, when BullMQ has made it (6.7). */
export const bullKeyTypes: Readonly<Record<string, string>> = {
  wait: 'list',
  active: 'list',
  paused: 'list',
  'waiting-children': 'zset',
  delayed: 'zset',
  prioritized: 'zset',
  completed: 'zset',
  failed: 'zset',
  repeat: 'zset',
  marker: 'zset',
  stalled: 'set',
  meta: 'hash',
  id: 'string',
  pc: 'string',
  'stalled-check': 'string',
  limiter: 'string',
  events: 'stream',
};

/**
 * The reserved names whose key under `base` (`<prefix>:<queue>:`) has a type
 * other than BullMQ's own, or exists though BullMQ keeps nothing there: a
 * user's key written over it. Empty when every key is intact.
 */
export async function overwrittenKeys(
  redis: {
    pipeline(): { type(key: string): unknown; exec(): Promise<[Error | null, unknown][] | null> };
  },
  base: string,
): Promise<string[]> {
  const names = reservedNames();
  const pipeline = redis.pipeline();
  for (const name of names) pipeline.type(base + name);
  const types = ((await pipeline.exec()) ?? []).map(([, t]) => String(t));
  return names.filter((name, i) => types[i] !== 'none' && types[i] !== bullKeyTypes[name]);
}

import type { Redis } from 'ioredis';

/**
 * requeue's own Lua scripts, in one place. Each runs atomically in Redis.
 */
const scripts = {
  /** Writes a job's `rq` state only while `token` still holds the job's lock. */
  requeueSetStateIfLocked: {
    numberOfKeys: 2,
    lua: `
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('HSET', KEYS[1], 'rq', ARGV[2])
  return 1
end
return 0
`,
  },
} as const;

type ScriptName = keyof typeof scripts;
type ScriptRedis = Redis & Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;

function withScripts(redis: Redis): ScriptRedis {
  for (const [name, def] of Object.entries(scripts)) {
    if (!(name in redis)) redis.defineCommand(name, def);
  }
  return redis as ScriptRedis;
}

/** Sets `rq` on a job hash if the lock is still `token`'s; true when written. */
export async function setStateIfLocked(
  redis: Redis,
  jobKey: string,
  token: string,
  state: string,
): Promise<boolean> {
  const result = await withScripts(redis).requeueSetStateIfLocked(
    jobKey,
    `${jobKey}:lock`,
    token,
    state,
  );
  return result === 1;
}

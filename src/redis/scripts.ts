import type { Redis } from 'ioredis';

/**
 * requeue's own Lua scripts, in one place. Each runs atomically in Redis.
 * They store and move state; what the state means is decided in
 * `src/policy/`.
 */
/**
 * Lua shared by the windowed scripts: sums a bucketed window's counters
 * (fields `<bucket>:<letter>`) by letter, deleting buckets that have left
 * the window; fields of another shape come back as they are.
 */
const readWindow = `
local function readWindow(key, bucket, buckets)
  local sums, other = {}, {}
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local name, value = fields[i], tonumber(fields[i + 1])
    local b = tonumber(string.match(name, '^(%-?%d+):'))
    if b == nil then
      other[name] = value
    elseif b <= bucket - buckets then
      redis.call('HDEL', key, name)
    else
      local letter = string.sub(name, -1)
      sums[letter] = (sums[letter] or 0) + value
    end
  end
  return sums, other
end
`;

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
  /**
   * Adds a batch of outcomes to a breaker's bucketed window, drops buckets
   * that left the window, and returns the window's sums with the breaker's
   * state and version.
   * KEYS: window, state, known-keys set. ARGV: now, bucketMs, buckets, total,
   * failures, trailing failures, had a success (1/0), breaker key.
   */
  requeueBreakerRecord: {
    numberOfKeys: 3,
    lua: `${readWindow}
local now, bucketMs, buckets = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local total, failures, trailing = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local bucket = math.floor(now / bucketMs)
if total > 0 then
  redis.call('HINCRBY', KEYS[1], bucket .. ':t', total)
  if failures > 0 then redis.call('HINCRBY', KEYS[1], bucket .. ':f', failures) end
  if ARGV[7] == '1' then
    redis.call('HSET', KEYS[1], 'cf', trailing)
  else
    redis.call('HINCRBY', KEYS[1], 'cf', trailing)
  end
  redis.call('PEXPIRE', KEYS[1], bucketMs * (buckets + 1))
  redis.call('SADD', KEYS[3], ARGV[8])
end
local sums, other = readWindow(KEYS[1], bucket, buckets)
local state = redis.call('HMGET', KEYS[2], 's', 'v')
return {sums.t or 0, sums.f or 0, other.cf or 0, state[1] or '', tonumber(state[2] or '0')}
`,
  },
  /**
   * Compare-and-set of a breaker's state: writes only if the version is still
   * the one read, keeps the set of non-closed keys, optionally clears the
   * window, and publishes the transition. Returns 1 if written.
   * KEYS: state, window, open-keys set. ARGV: expected version, state JSON,
   * phase, breaker key, channel, message ('' for none), clear window (1/0).
   */
  requeueBreakerCas: {
    numberOfKeys: 3,
    lua: `
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'v', version + 1)
if ARGV[3] == 'closed' then
  redis.call('SREM', KEYS[3], ARGV[4])
else
  redis.call('SADD', KEYS[3], ARGV[4])
end
if ARGV[7] == '1' then redis.call('DEL', KEYS[2]) end
if ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
`,
  },
  /**
   * Token bucket take: removes `cost` tokens if there are that many.
   * KEYS: bucket hash. ARGV: capacity, cost. Returns {granted (1/0), tokens left}.
   */
  requeueBudgetTake: {
    numberOfKeys: 1,
    lua: `
local capacity, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
if tokens >= cost then
  tokens = tokens - cost
  redis.call('HSET', KEYS[1], 'tokens', tokens)
  return {1, tostring(tokens)}
end
redis.call('HINCRBY', KEYS[1], 'denied', 1)
return {0, tostring(tokens)}
`,
  },
  /**
   * Token bucket refund, never above capacity.
   * KEYS: bucket hash. ARGV: capacity, amount. Returns the tokens.
   */
  requeueBudgetRefund: {
    numberOfKeys: 1,
    lua: `
local capacity, amount = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
tokens = math.min(capacity, tokens + amount)
redis.call('HSET', KEYS[1], 'tokens', tokens)
return tostring(tokens)
`,
  },
  /**
   * Ratio budget: counts requests and retries in a bucketed window and grants
   * a retry while retries + 1 ≤ max(minRetries, ratio × requests) — the SRE
   * book's rule; this is the one place that formula lives.
   * KEYS: window hash. ARGV: now, bucketMs, buckets, requests to add, take a
   * retry (1/0), ratio, minRetries. Returns {granted, requests, retries}.
   */
  requeueRatioBudget: {
    numberOfKeys: 1,
    lua: `${readWindow}
local now, bucketMs, buckets = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bucket = math.floor(now / bucketMs)
if tonumber(ARGV[4]) > 0 then redis.call('HINCRBY', KEYS[1], bucket .. ':q', ARGV[4]) end
local sums = readWindow(KEYS[1], bucket, buckets)
local requests, retries = sums.q or 0, sums.r or 0
local granted = 0
if ARGV[5] == '1' then
  if retries + 1 <= math.max(tonumber(ARGV[7]), tonumber(ARGV[6]) * requests) then
    redis.call('HINCRBY', KEYS[1], bucket .. ':r', 1)
    retries = retries + 1
    granted = 1
  end
end
redis.call('PEXPIRE', KEYS[1], bucketMs * (buckets + 1))
return {granted, requests, retries}
`,
  },
  /**
   * Removes waiting jobs of a queue that no worker processes (a DLQ) in one
   * call: list entry, hash and logs. Returns how many existed.
   * KEYS: wait list, then each job's hash and logs key. ARGV: the ids, in order.
   */
  requeueRemoveWaiting: {
    // Keys declared per call (the first argument counts them), as Redis Cluster wants.
    numberOfKeys: undefined,
    lua: `
local removed = 0
for i = 2, #KEYS, 2 do
  if redis.call('DEL', KEYS[i]) == 1 then removed = removed + 1 end
  redis.call('DEL', KEYS[i + 1])
  redis.call('LREM', KEYS[1], 1, ARGV[i / 2])
end
return removed
`,
  },
} as const;

type ScriptName = keyof typeof scripts;
type ScriptRedis = Redis & Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;

/** Registers requeue's scripts on a connection (once) and returns it typed. */
export function withScripts(redis: Redis): ScriptRedis {
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

/** Removes jobs waiting in a queue nobody processes (the DLQ), in one round trip. */
export async function removeWaitingJobs(
  redis: Redis,
  waitKey: string,
  jobKeyPrefix: string,
  ids: readonly string[],
): Promise<number> {
  if (ids.length === 0) return 0;
  const keys = [waitKey, ...ids.flatMap((id) => [jobKeyPrefix + id, `${jobKeyPrefix}${id}:logs`])];
  return (await withScripts(redis).requeueRemoveWaiting(keys.length, ...keys, ...ids)) as number;
}

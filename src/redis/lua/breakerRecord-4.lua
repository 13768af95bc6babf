--[[
  Adds a batch of outcomes to a breaker's window (see includes/window) and
  returns the window's sums with the breaker's state and version.
  KEYS: window, state, seen-keys zset, open-keys set.
  ARGV: bucketMs, buckets (used only by a new window), total, failures,
        trailing failures, had a success (1/0), breaker key,
        time override in ms ('' = Redis's TIME; tests only),
        attempts in the batch ('' = total), idleMs ('' = never expire),
        breaker state key prefix.
  Bounded state: the window (and a state that has a TTL; an isolated one
  has none) lives idleMs past this write; the key is scored by this time
  in the seen set, which drops up to 100 keys idle past idleMs per call
  (and their open-set entry when their state is gone) and expires itself
  idleMs after the last record of any key. Counting jobs, `total` and
        `failures` may be 0, and `failures` negative (a retry's success
        takes its job's failure back), while attempts still happened.
  Returns {total, failures, failures in a row, state JSON, version,
           bucketMs, buckets} (the geometry actually used).
]]
--- @include "includes/window"
local now = windowNow(ARGV[8])
local w = openWindow(KEYS[1], now, tonumber(ARGV[1]), tonumber(ARGV[2]))
local total, failures, trailing = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cf = tonumber(w.other.cf or '0')
local attempts = tonumber(ARGV[9] or '') or total
if attempts > 0 then
  addToWindow(w, 't', total)
  addToWindow(w, 'f', failures)
  if ARGV[6] == '1' then
    cf = trailing
    redis.call('HSET', KEYS[1], 'cf', cf)
  else
    cf = redis.call('HINCRBY', KEYS[1], 'cf', trailing)
  end
  redis.call('ZADD', KEYS[3], now, ARGV[7])
end
local idle = tonumber(ARGV[10] or '')
if idle then
  redis.call('PEXPIRE', KEYS[1], idle)
  if redis.call('PTTL', KEYS[2]) > 0 then redis.call('PEXPIRE', KEYS[2], idle) end
  local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. (now - idle), 'LIMIT', 0, 100)
  for _, key in ipairs(stale) do
    redis.call('ZREM', KEYS[3], key)
    if redis.call('EXISTS', ARGV[11] .. key) == 0 then redis.call('SREM', KEYS[4], key) end
  end
  redis.call('PEXPIRE', KEYS[3], idle)
end
local state = redis.call('HMGET', KEYS[2], 's', 'v')
return {w.sums.t or 0, w.sums.f or 0, cf, state[1] or '', tonumber(state[2] or '0'),
        w.bucketMs, w.buckets}

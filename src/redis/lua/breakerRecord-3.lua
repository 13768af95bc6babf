--[[
  Adds a batch of outcomes to a breaker's bucketed window, drops buckets
  that left the window, and returns the window's sums with the breaker's
  state and version.
  KEYS: window, state, known-keys set.
  ARGV: now, bucketMs, buckets, total, failures, trailing failures,
        had a success (1/0), breaker key.
]]
--- @include "includes/read-window"
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

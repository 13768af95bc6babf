--[[
  Gives back a place taken by limitAcquire-3.lua and updates the key's limit
  from what the attempt showed, exactly as nextLimit in
  src/policy/limit/aimd.ts does (held to it by test/integration/limit-lua.test.ts).
  When the key has no lease left, its limit is back at `initial` or above and
  it has no 429 streak, its state is removed: a key with nothing to remember
  leaves nothing behind.
  Otherwise the state lives idleMs past its last write.
  KEYS[1] index zset   KEYS[2] state hash (l limit, t threshold, d decreasedAt, m peak, r throttles)
  KEYS[3] leases zset
  ARGV[1] key  ARGV[2] token  ARGV[3] signal (success|overload|throttled|pause|neutral)
  ARGV[4] latencyMs  ARGV[5] startedAt (ms)  ARGV[6] floor  ARGV[7] ceiling
  ARGV[8] initial  ARGV[9] additiveIncrease  ARGV[10] backoffRatio
  ARGV[11] latencyTargetMs  ARGV[12] idleMs  ARGV[13] now (ms; '' for Redis's TIME)
  ARGV[14] recoveryMs
  Returns {limit (string), threshold (string), decreasedAt, in flight (after),
  peak (string), throttles}.
]]
local rcall = redis.call
local now = tonumber(ARGV[13])
if not now then
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local floor, ceiling, initial = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
rcall('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
rcall('ZREM', KEYS[3], ARGV[2])
local left = rcall('ZCARD', KEYS[3])
local state = rcall('HMGET', KEYS[2], 'l', 't', 'd', 'm', 'r')
local limit = tonumber(state[1] or initial)
local threshold = tonumber(state[2] or initial)
local decreasedAt = tonumber(state[3] or 0)
local peak = tonumber(state[4] or 0)
local throttles = tonumber(state[5] or 0)
local ratio, recoveryMs = tonumber(ARGV[10]), tonumber(ARGV[14])

local signal = ARGV[3]
if signal == 'throttled' then throttles = throttles + 1 elseif signal == 'success' then throttles = 0 end
if signal == 'success' and tonumber(ARGV[4]) > tonumber(ARGV[11]) then signal = 'overload' end
if tonumber(ARGV[5]) < decreasedAt then signal = 'neutral' end
if signal == 'success' then
  if (left + 1) * 2 >= limit then
    if peak > 0 then
      -- recoveredLimit in src/policy/limit/recovery.ts, the same operations in the same order.
      local elapsed = now - decreasedAt
      local w = peak
      if elapsed < recoveryMs then
        local rest = 1 - math.max(0, elapsed) / recoveryMs
        w = peak * (1 - (1 - ratio) * rest * rest * rest)
      end
      limit = math.max(limit, w)
      if elapsed >= recoveryMs then peak = 0 end
    elseif limit < threshold then limit = limit + 1
    else limit = limit + tonumber(ARGV[9]) / limit end
  end
elseif signal == 'overload' or signal == 'throttled' then
  if signal == 'throttled' then peak = limit else peak = 0 end
  limit = limit * ratio
  threshold = limit
  decreasedAt = now
elseif signal == 'pause' then
  threshold = limit * ratio
  limit = floor
  peak = 0
  decreasedAt = now
end
limit = math.min(ceiling, math.max(floor, limit))
threshold = math.min(ceiling, math.max(floor, threshold))

local l, t = string.format('%.17g', limit), string.format('%.17g', threshold)
local m = string.format('%.17g', peak)
if left == 0 and limit >= initial and throttles == 0 then
  rcall('DEL', KEYS[2])
  rcall('ZREM', KEYS[1], ARGV[1])
else
  rcall('HSET', KEYS[2], 'l', l, 't', t, 'd', decreasedAt, 'm', m, 'r', throttles)
  rcall('PEXPIRE', KEYS[2], ARGV[12])
  rcall('ZADD', KEYS[1], 'GT', now, ARGV[1])
  local top = rcall('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  rcall('PEXPIRE', KEYS[1], math.max(1, tonumber(top[2]) + tonumber(ARGV[12]) - now))
end
return {l, t, decreasedAt, left, m, throttles}

--[[
  A per-key rate limit held fleet-wide (GCRA, the token bucket as a time):
  reserves the next slot for one delivery and says when it is. Each call
  moves the key's theoretical arrival time (TAT) one interval on; up to
  `burst` slots may fall due at once after a quiet spell. A reservation in
  the future is kept: the caller waits for it and does not ask again.
  KEYS[1] the key's TAT (string, ms)
  ARGV[1] now (ms)   ARGV[2] interval (ms per delivery)   ARGV[3] burst
  Returns the slot's time (ms): now or earlier means "go now".
  The key expires once its TAT has passed (a quiet key leaves nothing).
]]
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nextTat = tat + interval
local slot = nextTat - burst * interval
redis.call('SET', KEYS[1], string.format('%d', nextTat), 'PX', math.ceil(nextTat - now) + 1000)
if slot < now then slot = now end
return math.floor(slot)

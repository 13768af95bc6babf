--[[
  Takes a place under a key's adaptive concurrency limit, for the fleet
  (src/policy/limit/aimd.ts decides the limit; limitRelease-3.lua updates it).
  Expired leases (a crashed worker's) are dropped first. A key with no state
  stores none here but its lease; the index notes the key until its last lease
  could expire, and loses keys idle past idleMs.
  KEYS[1] index zset (key -> time its state may last touch)
  KEYS[2] state hash (l limit, t threshold, d decreasedAt)   KEYS[3] leases zset (token -> expiry)
  ARGV[1] key  ARGV[2] token  ARGV[3] floor  ARGV[4] ceiling  ARGV[5] initial
  ARGV[6] leaseMs  ARGV[7] idleMs  ARGV[8] now (ms; '' for Redis's TIME)
  Returns {admitted (1/0), in flight (after), limit (string), now}.
]]
local rcall = redis.call
local now = tonumber(ARGV[8])
if not now then
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local floor, ceiling = tonumber(ARGV[3]), tonumber(ARGV[4])
rcall('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local limit = tonumber(rcall('HGET', KEYS[2], 'l') or ARGV[5])
limit = math.min(ceiling, math.max(floor, limit))
local inflight = rcall('ZCARD', KEYS[3])
if inflight >= math.floor(limit) then
  return {0, inflight, string.format('%.17g', limit), now}
end
local expiry = now + tonumber(ARGV[6])
rcall('ZADD', KEYS[3], expiry, ARGV[2])
local last = rcall('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
-- Relative, so that a test's made-up clock gives the same TTL as Redis's.
rcall('PEXPIRE', KEYS[3], math.max(expiry, tonumber(last[2])) - now)
rcall('ZADD', KEYS[1], 'GT', expiry, ARGV[1])
rcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[7]))
-- The index itself goes idleMs after its latest member's time: nothing is left once every key is idle.
local top = rcall('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
rcall('PEXPIRE', KEYS[1], math.max(1, tonumber(top[2]) + tonumber(ARGV[7]) - now))
return {1, inflight + 1, string.format('%.17g', limit), now}

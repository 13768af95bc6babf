--[[
  One batch of a DLQ retention pass, in one step: drops records dead before
  the cutoff, then the oldest beyond the count, at most `limit` in all. Each
  record is removed by exactly one batch, so concurrent callers can never
  count one twice, and what a batch reads is what it removes.

  A pass is one or more batches under one token, one pass at a time for the
  whole fleet: a batch that removes `limit` (more may follow) holds the lock
  for the token for `lockMs`; a batch that removes less ends the pass and
  frees the lock. While another token holds it, nothing is touched. A pass
  that dies leaves the lock to expire; the records stay consistent either way.
  A `limit` of 0 removes nothing and frees the lock if the token holds it (a
  pass that stops early).

  KEYS[1] DLQ index (zset)   KEYS[2] the retention's lock
  ARGV[1] dead record key prefix   ARGV[2] cutoff (ms)   ARGV[3] max count
  ARGV[4] limit   ARGV[5] the pass's token   ARGV[6] lockMs

  Returns {removed for age, removed for count}, or {-1, the lock's pttl}
  when another pass holds the lock.
]]
local rcall = redis.call
local holder = rcall('GET', KEYS[2])
if holder and holder ~= ARGV[5] then return {-1, rcall('PTTL', KEYS[2])} end
local limit = tonumber(ARGV[4])
local old = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, limit)
for _, id in ipairs(old) do
  rcall('UNLINK', ARGV[1] .. id)
  rcall('ZREM', KEYS[1], id)
end
local byCount = 0
local excess = rcall('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if excess > 0 then
  local n = math.min(excess, limit - #old)
  if n > 0 then
    for _, id in ipairs(rcall('ZRANGE', KEYS[1], 0, n - 1)) do
      rcall('UNLINK', ARGV[1] .. id)
      byCount = byCount + 1
    end
    rcall('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  end
end
if limit > 0 and #old + byCount >= limit then
  rcall('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
elseif holder then
  rcall('DEL', KEYS[2])
end
return {#old, byCount}

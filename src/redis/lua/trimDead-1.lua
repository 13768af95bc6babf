--[[
  DLQ retention in one step: drops records dead before the cutoff, then the
  oldest beyond the count, at most `limit` in all per call.
  KEYS[1] DLQ index
  ARGV[1] dead record key prefix   ARGV[2] cutoff (ms)   ARGV[3] max count
  ARGV[4] limit
  Returns {removed for age, removed for count}.
]]
local rcall = redis.call
local limit = tonumber(ARGV[4])
local old = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, limit)
for _, id in ipairs(old) do
  rcall('DEL', ARGV[1] .. id)
  rcall('ZREM', KEYS[1], id)
end
local byCount = 0
local excess = rcall('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if excess > 0 then
  local n = math.min(excess, limit - #old)
  if n > 0 then
    for _, id in ipairs(rcall('ZRANGE', KEYS[1], 0, n - 1)) do
      rcall('DEL', ARGV[1] .. id)
      rcall('ZREM', KEYS[1], id)
      byCount = byCount + 1
    end
  end
end
return {#old, byCount}

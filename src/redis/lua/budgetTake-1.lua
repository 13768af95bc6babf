--[[
  Token bucket take: removes `cost` tokens if there are that many.
  KEYS: bucket hash. ARGV: capacity, cost.
  Returns {granted (1/0), tokens left}.
]]
local capacity, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
if tokens >= cost then
  tokens = tokens - cost
  redis.call('HSET', KEYS[1], 'tokens', tokens)
  return {1, tostring(tokens)}
end
redis.call('HINCRBY', KEYS[1], 'denied', 1)
return {0, tostring(tokens)}

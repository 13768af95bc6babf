--[[
  Token bucket take, as src/policy/budget/token-bucket.ts specifies it:
  removes `cost` tokens if there are that many, else counts a denial.
  A missing bucket is full.
  KEYS: bucket hash. ARGV: capacity, cost.
  Returns {granted (1/0), tokens left, denied}.
]]
local cost = tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
if tokens >= cost then
  tokens = tokens - cost
  redis.call('HSET', KEYS[1], 'tokens', tokens)
  return {1, tostring(tokens), tonumber(redis.call('HGET', KEYS[1], 'denied') or '0')}
end
return {0, tostring(tokens), redis.call('HINCRBY', KEYS[1], 'denied', 1)}

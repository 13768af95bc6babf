--[[
  Token bucket refund, never above capacity, as
  src/policy/budget/token-bucket.ts specifies it. A missing bucket is full.
  KEYS: bucket hash. ARGV: capacity, amount. Returns the tokens.
]]
local capacity, amount = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
tokens = math.min(capacity, tokens + amount)
redis.call('HSET', KEYS[1], 'tokens', tokens)
return tostring(tokens)

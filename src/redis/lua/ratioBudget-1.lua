--[[
  Ratio budget: counts requests and retries in a bucketed window and grants
  a retry while retries + 1 <= max(minRetries, ratio x requests), the SRE
  book's rule.
  KEYS: window hash.
  ARGV: now, bucketMs, buckets, requests to add, take a retry (1/0), ratio, minRetries.
  Returns {granted, requests, retries}.
]]
--- @include "includes/read-window"
local now, bucketMs, buckets = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bucket = math.floor(now / bucketMs)
if tonumber(ARGV[4]) > 0 then redis.call('HINCRBY', KEYS[1], bucket .. ':q', ARGV[4]) end
local sums = readWindow(KEYS[1], bucket, buckets)
local requests, retries = sums.q or 0, sums.r or 0
local granted = 0
if ARGV[5] == '1' then
  if retries + 1 <= math.max(tonumber(ARGV[7]), tonumber(ARGV[6]) * requests) then
    redis.call('HINCRBY', KEYS[1], bucket .. ':r', 1)
    retries = retries + 1
    granted = 1
  end
end
redis.call('PEXPIRE', KEYS[1], bucketMs * (buckets + 1))
return {granted, requests, retries}

--[[
  Writes a job's `rq` state only while `token` still holds the job's lock.
  KEYS: job hash, lock. ARGV: token, state JSON. Returns 1 if written.
]]
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('HSET', KEYS[1], 'rq', ARGV[2])
  return 1
end
return 0

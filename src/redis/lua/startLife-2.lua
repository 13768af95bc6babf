--[[
  Starts a new life for an active job that an outside actor sent back after
  it completed (bull-board's "retry", BullMQ's `job.retry('completed')` or
  `retryJobs`): like a replay, its attempts count from 1 again and its
  history is kept. Only while `token` still holds the job's lock.
  KEYS: job hash, lock. ARGV: token, the attempts started before this one,
  BullMQ's attempts made (`atm`) now.
  Returns the new life, or -1 if the lock is not ours.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
local life = redis.call('HINCRBY', KEYS[1], 'rql', 1)
redis.call('HSET', KEYS[1], 'rqo', ARGV[2], 'rqm', ARGV[3])
return life

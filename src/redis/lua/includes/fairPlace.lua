--[[
  Start-time fair queuing's placement (Goyal et al. 1996), on BullMQ's own
  'prioritized' set; the one copy of the formula (includes/fairStamp.lua for
  a new keyed job, replayDead-9.lua for a dead job recovered into a lane):
    V   = the head's score in the set minus 2^32 (the virtual time; 0 when empty)
    S   = max(V, F[key])   the job's start tag
    F   = S + cost         the key's finish tag (cost = 1 / weight)
    score = 2^32 + S       (BullMQ scores a priority-1 job 2^32 + its counter)
  Keys whose F <= V are dropped, all of them when the set is empty; BullMQ's
  counter is set to floor(V) so the jobs BullMQ itself puts back land at the
  virtual time. The job must not be in the set when this runs.
]]
local function fairPlace(prioritizedKey, pcKey, fairKey, id, dispatchKey, cost)
  local base = 4294967296
  local v = 0
  local head = redis.call('ZRANGE', prioritizedKey, 0, 0, 'WITHSCORES')
  if head[2] then
    v = math.max(0, tonumber(head[2]) - base)
    redis.call('ZREMRANGEBYSCORE', fairKey, '-inf', v)
  else
    redis.call('DEL', fairKey)
  end
  local s = math.max(v, tonumber(redis.call('ZSCORE', fairKey, dispatchKey) or '0'))
  redis.call('ZADD', fairKey, s + tonumber(cost), dispatchKey)
  redis.call('ZADD', prioritizedKey, base + s, id)
  redis.call('SET', pcKey, string.format('%d', math.floor(v)))
end

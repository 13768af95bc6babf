--[[
  Start-time fair queuing's placement (Goyal et al. 1996), on BullMQ's own
  'prioritized' set; the one copy of the formula (includes/fairStamp.lua for
  a new keyed job, replayDead-9.lua for a dead job recovered into a lane):
    V   = the head's score in the set minus 2^32 (the virtual time; 0 when empty)
    S   = max(V, F[key])   the job's start tag
    F   = S + cost         the key's finish tag (cost = 1 / weight)
    score = 2^32 + S       (BullMQ scores a priority-1 job 2^32 + its counter)
  The job may be in the set already (BullMQ's add put it there): its own
  entry is not the head, and its score is replaced. A key that (re)joins
  (no F, or F <= V) drops every key whose F <= V (a new job of theirs starts
  at V anyway), and the set empties them all: per-key state lives only
  while needed, and a key busy all along costs no sweep. BullMQ's counter is
  set to floor(V) so the jobs BullMQ itself puts back land at the virtual
  time.
]]
local function fairPlace(prioritizedKey, pcKey, fairKey, id, dispatchKey, cost)
  local base = 4294967296
  local v = 0
  local f = 0
  local head = redis.call('ZRANGE', prioritizedKey, 0, 1, 'WITHSCORES')
  local headScore = head[2]
  if head[1] == id then headScore = head[4] end
  if headScore then
    v = math.max(0, tonumber(headScore) - base)
    f = tonumber(redis.call('ZSCORE', fairKey, dispatchKey) or '0')
    if f <= v then redis.call('ZREMRANGEBYSCORE', fairKey, '-inf', v) end
  else
    redis.call('DEL', fairKey)
  end
  local s = math.max(v, f)
  redis.call('ZADD', fairKey, s + tonumber(cost), dispatchKey)
  redis.call('ZADD', prioritizedKey, base + s, id)
  redis.call('SET', pcKey, string.format('%d', math.floor(v)))
end

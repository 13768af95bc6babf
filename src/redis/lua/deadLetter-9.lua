--[[
  Moves an active job to the dead-letter store in one step, fenced by the
  job's lock: the job leaves BullMQ's active list, its hash becomes the dead
  record (renamed, so the payload never travels), and the DLQ index gets it.
  A worker whose lock has expired (another worker has the job now) changes
  nothing.

  KEYS[1] active list       KEYS[2] stalled set     KEYS[3] job hash
  KEYS[4] job lock          KEYS[5] job logs        KEYS[6] DLQ index (zset)
  KEYS[7] dead record hash  KEYS[8] death sequence  KEYS[9] events stream
  ARGV[1] lock token        ARGV[2] job id          ARGV[3] state JSON (rq)
  ARGV[4] death JSON        ARGV[5] deadAt (ms)     ARGV[6] expected generation
          of a record already under this id ('' when none is expected)
  ARGV[7] how long (ms) to keep a marker under the job's id, so that an add of
          this id that the client re-sends after a reconnect, arriving after
          the death, finds a key and is a no-op in BullMQ ('0': none; given
          for jobs without an idempotency key, whose id only a re-send reuses)

  Returns {1, generation} when moved; {0} when the lock is not ours;
  {2, generation, state} when a record of an earlier death holds the id:
  the caller merges the histories and calls again expecting that generation;
  {3} when the death it expected has left since: call again expecting none.
]]
local rcall = redis.call
if rcall('GET', KEYS[4]) ~= ARGV[1] then return {0} end
if rcall('EXISTS', KEYS[7]) == 1 then
  local old = rcall('HMGET', KEYS[7], 'gen', 'rq')
  local oldGen = old[1] or ''
  if oldGen ~= ARGV[6] then return {2, oldGen, old[2] or ''} end
  rcall('DEL', KEYS[7])
elseif ARGV[6] ~= '' then
  -- The earlier death whose history the caller merged has left meanwhile (a
  -- replay or purge took it): store this death without that history.
  return {3}
end
local gen = rcall('INCR', KEYS[8])
rcall('LREM', KEYS[1], 1, ARGV[2])
rcall('SREM', KEYS[2], ARGV[2])
rcall('DEL', KEYS[4], KEYS[5])
rcall('HSET', KEYS[3], 'rq', ARGV[3], 'dead', ARGV[4], 'gen', gen, 'finishedOn', ARGV[5])
rcall('RENAME', KEYS[3], KEYS[7])
if tonumber(ARGV[7]) > 0 then
  rcall('HSET', KEYS[3], 'rqgone', gen)
  rcall('PEXPIRE', KEYS[3], ARGV[7])
end
rcall('ZADD', KEYS[6], ARGV[5], ARGV[2])
rcall('XADD', KEYS[9], 'MAXLEN', '~', 10000, '*', 'event', 'removed', 'jobId', ARGV[2], 'prev', 'active')
return {1, gen}

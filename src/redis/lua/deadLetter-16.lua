--[[
  Moves an active job to the dead-letter store in one step, fenced by the
  job's lock: the job leaves BullMQ's active list, its hash becomes the dead
  record (renamed, so the payload never travels), and the DLQ index gets it.
  A worker whose lock has expired (another worker has the job now) changes
  nothing.

  What BullMQ's own finalization of a failed job does for the keys BullMQ
  owns (moveToFinished's failed branch) is done here with BullMQ's own Lua
  functions (`bullmq:` includes, from the installed BullMQ): the job's
  deduplication key is released (and a `keepLastIfActive` job waiting on it
  is added), and a flow's parent learns that its child died — per the
  child's `failParentOnFailure` (the parent goes to wait with a deferred
  failure naming the child: its worker fails it, requeue's dead-letters it),
  `continueParentOnFailure`, `ignoreDependencyOnFailure` or
  `removeDependencyOnFailure`. Then BullMQ's `failed` event, with the death's
  message as `failedReason` (plus `attemptsMade` and `deadReason`), in the
  same step as the move: the job itself is in the DLQ, never in BullMQ's
  failed set.

  KEYS[1] active list       KEYS[2] stalled set     KEYS[3] job hash
  KEYS[4] job lock          KEYS[5] job logs        KEYS[6] DLQ index (zset)
  KEYS[7] dead record hash  KEYS[8] death sequence  KEYS[9] events stream
  KEYS[10] meta             KEYS[11] wait list      KEYS[12] paused list
  KEYS[13] marker           KEYS[14] prioritized    KEYS[15] priority counter
  KEYS[16] delayed
  ARGV[1] lock token        ARGV[2] job id          ARGV[3] state JSON (rq)
  ARGV[4] death JSON        ARGV[5] deadAt (ms)     ARGV[6] expected generation
          of a record already under this id ('' when none is expected)
  ARGV[7] how long (ms) to keep a marker under the job's id, so that an add of
          this id that the client re-sends after a reconnect, arriving after
          the death, finds a key and is a no-op in BullMQ ('0': none; given
          for jobs without an idempotency key, whose id only a re-send reuses)
  ARGV[8] BullMQ's key prefix of the queue (`bull:<queue>:`)

  Returns {1, generation} when moved; {0} when the lock is not ours;
  {2, generation, state} when a record of an earlier death holds the id:
  the caller merges the histories and calls again expecting that generation;
  {3} when the death it expected has left since: call again expecting none.
]]
local rcall = redis.call

--- @include "bullmq:includes/getOrSetMaxEvents"
--- @include "bullmq:includes/moveChildFromDependenciesIfNeeded"
--- @include "bullmq:includes/removeDeduplicationKeyIfNeededOnFinalization"
--- @include "bullmq:includes/requeueDeduplicatedJob"

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
local jobId, deadAt = ARGV[2], ARGV[5]
local death = cjson.decode(ARGV[4])
local gen = rcall('INCR', KEYS[8])
rcall('LREM', KEYS[1], 1, jobId)
rcall('SREM', KEYS[2], jobId)
rcall('DEL', KEYS[4], KEYS[5])

-- BullMQ's finalization of a failed job, for the keys BullMQ owns.
local maxEvents = getOrSetMaxEvents(KEYS[10])
local flow = rcall('HMGET', KEYS[3], 'parent', 'deid', 'defa')
removeDeduplicationKeyIfNeededOnFinalization(ARGV[8], flow[2], jobId)
if flow[2] then
  requeueDeduplicatedJob(ARGV[8], flow[2], KEYS[9], KEYS[10], KEYS[1], KEYS[11], KEYS[12],
    KEYS[13], KEYS[14], KEYS[15], KEYS[16], deadAt)
end
if flow[1] then moveChildFromDependenciesIfNeeded(flow[1], KEYS[3], death.message, deadAt) end

rcall('HSET', KEYS[3], 'rq', ARGV[3], 'dead', ARGV[4], 'gen', gen, 'finishedOn', deadAt)
-- A parent dead-lettered for its child's failure: its replay runs it.
if flow[3] then rcall('HDEL', KEYS[3], 'defa') end
rcall('RENAME', KEYS[3], KEYS[7])
if tonumber(ARGV[7]) > 0 then
  rcall('HSET', KEYS[3], 'rqgone', gen)
  rcall('PEXPIRE', KEYS[3], ARGV[7])
end
rcall('ZADD', KEYS[6], deadAt, jobId)
rcall('XADD', KEYS[9], 'MAXLEN', '~', maxEvents, '*', 'event', 'failed', 'jobId', jobId,
  'failedReason', death.message, 'prev', 'active', 'attemptsMade', death.attempts,
  'deadReason', death.reason)
return {1, gen}

--[[
  Fair dispatch across keys (start-time fair queuing, Goyal et al. 1996),
  on BullMQ's own 'prioritized' sorted set: run right after BullMQ's add of
  a keyed job (priority 1), in the same script (the keyed add of
  src/scheduler/bullmq/fair-add.ts), it moves the job from the place
  BullMQ gave it to its key's turn (the formula: includes/fairPlace.lua).
  Keys whose F <= V are dropped when a key (re)joins (a new job of theirs
  starts at V anyway), and all of them when the set is empty: per-key state
  lives only while needed.
  BullMQ's counter is set to floor(V), so the jobs BullMQ itself puts back
  (promoted retries and deferrals, stalled jobs) land at the virtual time,
  near the front, instead of behind every key's backlog.
  A job is stamped once: a second add of its id (an idempotent re-add)
  finds the job's `rqd` field and leaves the job where it is; a job not in
  the set (added delayed, or already taken) is left alone too.
  Returns 1 when the job was stamped, 0 when it was left alone.
]]
--- @include "fairPlace"
local function fairStamp(prioritizedKey, pcKey, fairKey, jobKey, id, dispatchKey, cost)
  if not redis.call('ZSCORE', prioritizedKey, id) then return 0 end
  if redis.call('HSETNX', jobKey, 'rqd', dispatchKey) == 0 then return 0 end
  fairPlace(prioritizedKey, pcKey, fairKey, id, dispatchKey, cost)
  return 1
end

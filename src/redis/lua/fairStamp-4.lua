--[[
  Fair dispatch across keys (start-time fair queuing, Goyal et al. 1996),
  on BullMQ's own 'prioritized' sorted set: run in the same MULTI as the
  BullMQ add of a keyed job (priority 1), it moves the job from the place
  BullMQ gave it to its key's turn (the formula: includes/fairPlace.lua).
  Keys whose F <= V are dropped (a new job of theirs starts at V anyway), and
  all of them when the set is empty: per-key state lives only while needed.
  BullMQ's counter is set to floor(V), so the jobs BullMQ itself puts back
  (promoted retries and deferrals, stalled jobs) land at the virtual time,
  near the front, instead of behind every key's backlog.
  A job is stamped once: a second add of its id (an idempotent re-add)
  finds the job's `rqd` field and leaves the job where it is.
  KEYS[1] prioritized zset   KEYS[2] BullMQ's priority counter (pc)
  KEYS[3] fair zset (key -> F)   KEYS[4] the job's hash
  ARGV[1] job id   ARGV[2] dispatch key   ARGV[3] cost (1 / weight)
  Returns 1 when the job was stamped, 0 when it was left alone.
]]
--- @include "includes/fairPlace"
local rcall = redis.call
if not rcall('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
if rcall('HSETNX', KEYS[4], 'rqd', ARGV[2]) == 0 then return 0 end
rcall('ZREM', KEYS[1], ARGV[1])
fairPlace(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
return 1

--[[
  Moves due delayed jobs of priority 0 (retries, deferrals, delayed adds) to
  the FRONT of the wait list, the end BullMQ's fetch takes from (RPOPLPUSH),
  up to ARGV[3] of them, doing otherwise what BullMQ 6.7's
  `includes/promoteDelayedJobs.lua` does (it LPUSHes them to the back): ZREM
  from delayed, a `waiting` event with prev `delayed`, `delay` 0, and the
  base marker unless the queue is paused or maxed (`isQueuePausedOrMaxed`).
  Prioritized jobs are left where they are, for BullMQ's own promotion.

  Due jobs beyond ARGV[3] are held (re-scored ARGV[5], still delayed) while
  more than ARGV[4] jobs wait and the queue is neither paused nor maxed, so
  that BullMQ's own promotion does not put them behind that backlog before
  this worker has the credit to move them; otherwise they are left to
  BullMQ's promotion (the back of a short list). At most 1,000 due jobs are
  looked at per call, as BullMQ does.

  KEYS[1] delayed   KEYS[2] wait   KEYS[3] meta   KEYS[4] active
  KEYS[5] marker    KEYS[6] events stream
  ARGV[1] job key prefix
  ARGV[2] highest due score (BullMQ's delayed score of now + 1 ms, minus 1;
          now is Redis's time as the worker keeps it: no TIME in a write)
  ARGV[3] at most this many to the front
  ARGV[4] hold only while more than this many jobs wait (-1: never hold)
  ARGV[5] the score a held job gets

  Returns {moved, held, lowest delayed score left or -1}.
]]
local rcall = redis.call
local limit = tonumber(ARGV[3])
local paused = rcall('HEXISTS', KEYS[3], 'paused') == 1
local concurrency = rcall('HGET', KEYS[3], 'concurrency')
if not paused and concurrency then
  paused = rcall('LLEN', KEYS[4]) >= tonumber(concurrency)
end
local hold = not paused and tonumber(ARGV[4]) >= 0 and rcall('LLEN', KEYS[2]) > tonumber(ARGV[4])

local due = rcall('ZRANGEBYSCORE', KEYS[1], 0, ARGV[2], 'LIMIT', 0, 1000)
local front = {}
local held = {}
for _, id in ipairs(due) do
  if (tonumber(rcall('HGET', ARGV[1] .. id, 'priority')) or 0) == 0 then
    if #front < limit then
      front[#front + 1] = id
    elseif hold then
      held[#held + 1] = id
    else
      break
    end
  end
end

if #front > 0 then
  rcall('ZREM', KEYS[1], unpack(front))
  -- The earliest due last, so that it is taken first.
  for i = #front, 1, -1 do rcall('RPUSH', KEYS[2], front[i]) end
  for _, id in ipairs(front) do
    rcall('XADD', KEYS[6], '*', 'event', 'waiting', 'jobId', id, 'prev', 'delayed')
    rcall('HSET', ARGV[1] .. id, 'delay', 0)
  end
  if not paused then rcall('ZADD', KEYS[5], 0, '0') end
end
-- In due order, the score's low bits keeping it.
for i, id in ipairs(held) do rcall('ZADD', KEYS[1], tonumber(ARGV[5]) + i - 1, id) end

local first = rcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#front, #held, first[2] or -1}

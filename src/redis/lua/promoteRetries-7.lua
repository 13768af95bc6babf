--[[
  Moves due delayed jobs of priority 0 (retries, deferrals, delayed adds) to
  the FRONT of the wait list, the end BullMQ's fetch takes from (RPOPLPUSH),
  up to ARGV[3] of them, doing otherwise what BullMQ 6.7's
  `includes/promoteDelayedJobs.lua` does (it LPUSHes them to the back): ZREM
  from delayed, a `waiting` event with prev `delayed`, `delay` 0, and the
  base marker unless the queue is paused or maxed (`isQueuePausedOrMaxed`).
  Prioritized jobs are left where they are, for BullMQ's own promotion.

  In due order across runs: the jobs an earlier run moved and no worker has
  fetched yet (the front block, from the front to the tail marker KEYS[7],
  the deepest of them) stay in front of this run's. The block is found with
  LPOS from the front, at most ARGV[7] long, taken off (RPOP) and pushed back
  in front of this run's jobs, in its order; a marker not found there (all
  fetched, or deeper than the bound) means no block. KEYS[7] names the
  deepest job moved, overwritten by each run that moves jobs.

  Due jobs beyond ARGV[3] are held (re-scored, still delayed) while more
  than ARGV[4] jobs wait and the queue is neither paused nor maxed, so that
  BullMQ's own promotion does not put them behind that backlog before this
  worker has the credit to move them; otherwise they are left to BullMQ's
  promotion (the back of a short list). The i-th held job (from 0) gets the
  score ARGV[5] + min(floor(i × ARGV[6]), ARGV[8]) ms, in due order (the
  score's low bits keep it): ARGV[6] is the worker's time per credit earned,
  so each is due about when the credit would cover it, and is not re-read
  and re-scored by every run meanwhile. At most 1,000 due jobs are looked at
  per call, as BullMQ does.

  KEYS[1] delayed   KEYS[2] wait   KEYS[3] meta   KEYS[4] active
  KEYS[5] marker    KEYS[6] events stream         KEYS[7] front block's tail marker
  ARGV[1] job key prefix
  ARGV[2] highest due score (BullMQ's delayed score of now + 1 ms, minus 1;
          now is Redis's time as the worker keeps it: no TIME in a write)
  ARGV[3] at most this many to the front
  ARGV[4] hold only while more than this many jobs wait (-1: never hold)
  ARGV[5] the score the first held job gets
  ARGV[6] ms between held jobs' due times (0: all at ARGV[5])
  ARGV[7] the longest front block looked for (jobs)
  ARGV[8] the most a held job is put off beyond ARGV[5] (ms)

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
  -- The block moved earlier and not fetched yet: off the front, to go back on after.
  local block = {}
  local tail = rcall('GET', KEYS[7])
  if tail then
    local at = rcall('LPOS', KEYS[2], tail, 'RANK', -1, 'MAXLEN', tonumber(ARGV[7]))
    if at then block = rcall('RPOP', KEYS[2], rcall('LLEN', KEYS[2]) - at) end
  end
  -- The latest due deepest, so that the earliest is taken first; then the block, in its order.
  local push = {}
  for i = #front, 1, -1 do push[#push + 1] = front[i] end
  for i = #block, 1, -1 do push[#push + 1] = block[i] end
  rcall('RPUSH', KEYS[2], unpack(push))
  rcall('SET', KEYS[7], front[#front])
  for _, id in ipairs(front) do
    rcall('XADD', KEYS[6], '*', 'event', 'waiting', 'jobId', id, 'prev', 'delayed')
    rcall('HSET', ARGV[1] .. id, 'delay', 0)
  end
  if not paused then rcall('ZADD', KEYS[5], 0, '0') end
end
-- In due order, each about when the credit would cover it.
local base, step, most = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8])
for i, id in ipairs(held) do
  local putOff = math.min(math.floor((i - 1) * step), most)
  rcall('ZADD', KEYS[1], base + putOff * 4096 + i - 1, id)
end

local first = rcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#front, #held, first[2] or -1}

--[[
  An operator's move of one delayed job (a scheduled retry): run it now, or
  delete it. Fenced: it acts only if the job is still in the delayed set
  with the score the caller read and the attempts made (`atm`) it read, so a
  job that moved on meanwhile (ran, was retried again, was replayed) is
  refused, never moved or deleted.

  Run now does what `promoteRetries-6.lua` does for one job: ZREM from
  delayed, `delay` 0, to the front of the wait list (or the prioritized set
  with BullMQ's score for a job with a priority), a `waiting` event with prev
  `delayed`, and the base marker unless the queue is paused.
  Delete removes the job's hash and its `:logs`, its deduplication key when
  it still names this job, and writes BullMQ's `removed` event; a job with a
  flow parent is refused (its parent's bookkeeping is BullMQ's).

  KEYS[1] delayed   KEYS[2] wait   KEYS[3] meta   KEYS[4] marker
  KEYS[5] events    KEYS[6] prioritized   KEYS[7] priority counter
  KEYS[8] the job's hash
  ARGV[1] 'promote' or 'remove'   ARGV[2] job id
  ARGV[3] the delayed score read  ARGV[4] the attempts made read
  ARGV[5] BullMQ's key prefix of the queue (`bull:<queue>:`)

  A parked job (`rqp` = its delayed due time: it waits for its key's slot,
  src/scheduler/bullmq/key-parking.ts) is not run now: -3 (the release of
  its key's parked list is what runs it, in its turn).

  Returns 1 done, 0 not delayed any more, -1 delayed but changed since
  read, -2 has a flow parent (delete only), -3 parked (run now only).
]]
local rcall = redis.call
local id = ARGV[2]
local score = rcall('ZSCORE', KEYS[1], id)
if not score or rcall('TYPE', KEYS[8])['ok'] ~= 'hash' then return 0 end
if tonumber(score) ~= tonumber(ARGV[3]) then return -1 end
local atm = rcall('HGET', KEYS[8], 'atm') or '0'
if tonumber(atm) ~= tonumber(ARGV[4]) then return -1 end

if ARGV[1] == 'promote' then
  local parked = rcall('HGET', KEYS[8], 'rqp')
  if parked and tonumber(parked) == math.floor(tonumber(score) / 4096) then return -3 end
  rcall('ZREM', KEYS[1], id)
  rcall('HSET', KEYS[8], 'delay', 0)
  local priority = tonumber(rcall('HGET', KEYS[8], 'priority')) or 0
  if priority == 0 then
    rcall('RPUSH', KEYS[2], id)
  else
    local counter = rcall('INCR', KEYS[7])
    rcall('ZADD', KEYS[6], priority * 0x100000000 + counter % 0x100000000, id)
  end
  rcall('XADD', KEYS[5], '*', 'event', 'waiting', 'jobId', id, 'prev', 'delayed')
  if rcall('HEXISTS', KEYS[3], 'paused') == 0 then rcall('ZADD', KEYS[4], 0, '0') end
  return 1
end

if rcall('HEXISTS', KEYS[8], 'parentKey') == 1 then return -2 end
local deid = rcall('HGET', KEYS[8], 'deid')
if deid then
  local dedup = ARGV[5] .. 'de:' .. deid
  if rcall('GET', dedup) == id then rcall('DEL', dedup) end
end
rcall('ZREM', KEYS[1], id)
rcall('DEL', KEYS[8], KEYS[8] .. ':logs')
rcall('XADD', KEYS[5], '*', 'event', 'removed', 'jobId', id, 'prev', 'delayed')
return 1

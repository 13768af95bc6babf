--[[
  Releases parked jobs (see parkKey-4.lua) into BullMQ's 'prioritized' set,
  as BullMQ's own promotion of a due prioritized job would (ZREM from delayed,
  score priority * 2^32 + the counter `pc`, which fair dispatch keeps at the
  virtual time: near the front; `delay` 0; the `waiting` event with prev
  `delayed`; the base marker unless the queue is paused or maxed).
  Either ARGV[5] jobs of one key (ARGV[4], a slot of it just freed), or, when
  ARGV[4] is empty, one job of each key whose index entry is older than
  ARGV[6] (a key nobody released lately: its slots' holders died or went
  elsewhere), at most 100 keys a call. An entry whose job is no longer parked
  (its hash's `rqp` is not the due time of its delayed score: it came back
  at its backstop time, or was moved by an operator) is dropped. A key whose
  list empties leaves the index; a touched one gets ARGV[3] as its time.
  KEYS[1] parked index zset   KEYS[2] delayed   KEYS[3] prioritized   KEYS[4] pc
  KEYS[5] marker   KEYS[6] meta   KEYS[7] events stream   KEYS[8] active   KEYS[9] wait
  ARGV[1] job key prefix   ARGV[2] parked list prefix (+ key)   ARGV[3] now (ms)
  ARGV[4] key or ''   ARGV[5] how many of that key   ARGV[6] stale before (ms)
  Returns {released, keys touched, jobs still parked in those keys}.
]]
local rcall = redis.call
local prefix, listPrefix, now = ARGV[1], ARGV[2], tonumber(ARGV[3])

local paused = rcall('HEXISTS', KEYS[6], 'paused') == 1
local concurrency = rcall('HGET', KEYS[6], 'concurrency')
if not paused and concurrency then
  paused = rcall('LLEN', KEYS[8]) >= tonumber(concurrency)
end

local released = 0
local function release(key, count)
  local list = listPrefix .. key
  local done, looked, kept = 0, 0, {}
  while done < count and looked < 100 do
    local id = rcall('LPOP', list)
    if not id then break end
    looked = looked + 1
    local jobKey = prefix .. id
    local due = tonumber(rcall('HGET', jobKey, 'rqp'))
    local score = rcall('ZSCORE', KEYS[2], id)
    if due and score and math.floor(tonumber(score) / 4096) == due then
      rcall('ZREM', KEYS[2], id)
      local priority = tonumber(rcall('HGET', jobKey, 'priority')) or 0
      if priority > 0 then
        local counter = rcall('INCR', KEYS[4])
        rcall('ZADD', KEYS[3], priority * 4294967296 + counter % 4294967296, id)
      else
        rcall('RPUSH', KEYS[9], id)
      end
      rcall('HDEL', jobKey, 'rqp')
      rcall('HSET', jobKey, 'delay', 0)
      rcall('XADD', KEYS[7], '*', 'event', 'waiting', 'jobId', id, 'prev', 'delayed')
      done = done + 1
    elseif due and not score and rcall('EXISTS', jobKey .. ':lock') == 1 then
      -- Still locked: its worker is between the park and its move (or runs
      -- it again): kept, in its place.
      kept[#kept + 1] = id
    end
  end
  for i = #kept, 1, -1 do rcall('LPUSH', list, kept[i]) end
  released = released + done
  local left = rcall('LLEN', list)
  if left == 0 then rcall('ZREM', KEYS[1], key) else rcall('ZADD', KEYS[1], now, key) end
  return left
end

local keys = {}
if ARGV[4] ~= '' then
  keys[1] = ARGV[4]
else
  keys = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[6], 'LIMIT', 0, 100)
end
local left = 0
for _, key in ipairs(keys) do
  left = left + release(key, ARGV[4] ~= '' and tonumber(ARGV[5]) or 1)
end
if released > 0 and not paused then rcall('ZADD', KEYS[5], 0, '0') end
return {released, #keys, left}

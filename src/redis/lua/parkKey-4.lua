--[[
  Parks a saturated key's jobs (see src/scheduler/bullmq/key-parking.ts): run
  just before the worker's fenced move of the job it fetched and could not
  run (its key's bulkhead or adaptive limit full) to BullMQ's delayed set at
  the park's backstop time. Notes the job in the key's parked list and marks
  its hash (`rqp` = the backstop due time, so that an unpark takes it only
  while it is still parked there), and parks with it the jobs of the same
  dispatch key among the first ARGV[6] of BullMQ's 'prioritized' set (fair
  dispatch puts a backlogged key's jobs there, one turn each): moved to the
  delayed set at the backstop time, so no worker fetches them only to put
  them back. Nothing is lost if the worker dies before its move: the job stays
  active (stalled recovery brings it back) and the unpark skips its entry.
  KEYS[1] the key's parked list   KEYS[2] parked index zset (key -> last touched, ms)
  KEYS[3] prioritized zset   KEYS[4] delayed zset
  ARGV[1] job key prefix   ARGV[2] the fetched job's id   ARGV[3] the saturated key
  ARGV[4] backstop due time (ms)   ARGV[5] now (ms)   ARGV[6] how many of the head to look at
  ARGV[7] the backstop delay (ms)
  Returns how many waiting jobs were parked with it.
]]
local rcall = redis.call
local prefix, id, key, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
rcall('HSET', prefix .. id, 'rqp', due)
rcall('RPUSH', KEYS[1], id)
rcall('ZADD', KEYS[2], tonumber(ARGV[5]), key)
if rcall('HGET', prefix .. id, 'rqd') ~= key then return 0 end
local head = rcall('ZRANGE', KEYS[3], 0, tonumber(ARGV[6]) - 1)
local score = tonumber(due) * 4096
local swept = 0
for _, other in ipairs(head) do
  if rcall('HGET', prefix .. other, 'rqd') == key then
    rcall('ZREM', KEYS[3], other)
    -- BullMQ's delayed score (due * 0x1000 + n, n < 4096), in head order.
    rcall('ZADD', KEYS[4], score + math.min(swept + 1, 4095), other)
    rcall('HSET', prefix .. other, 'rqp', due, 'delay', ARGV[7])
    rcall('RPUSH', KEYS[1], other)
    swept = swept + 1
  end
end
return swept

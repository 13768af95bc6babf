--[[
  Drops fair-dispatch state no waiting job needs (see includes/fairStamp.lua):
  all of it when BullMQ's 'prioritized' set is empty, else the keys whose finish
  tag is at or behind the virtual time. Run when a worker finds the queue
  drained, so keys that came and went leave nothing behind.
  KEYS[1] prioritized zset   KEYS[2] fair zset (key -> F)
  Returns how many keys were dropped.
]]
local rcall = redis.call
local head = rcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if not head[2] then
  local n = rcall('ZCARD', KEYS[2])
  rcall('DEL', KEYS[2])
  return n
end
return rcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', math.max(0, tonumber(head[2]) - 4294967296))

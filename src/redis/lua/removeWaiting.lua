--[[
  Removes waiting jobs of a queue that no worker processes (a DLQ) in one
  call: list entry, hash and logs. Returns how many existed.
  KEYS (declared per call): wait list, then each job's hash and logs key.
  ARGV: the ids, in order.
]]
local removed = 0
for i = 2, #KEYS, 2 do
  if redis.call('DEL', KEYS[i]) == 1 then removed = removed + 1 end
  redis.call('DEL', KEYS[i + 1])
  redis.call('LREM', KEYS[1], 1, ARGV[i / 2])
end
return removed

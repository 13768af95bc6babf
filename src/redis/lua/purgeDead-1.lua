--[[
  Deletes dead records for good, each only if it is still the death the
  caller read (same generation).
  KEYS[1] DLQ index
  ARGV[1] dead record key prefix   ARGV[2..] pairs: id, generation
  Returns how many were deleted.
]]
local rcall = redis.call
local removed = 0
for i = 2, #ARGV, 2 do
  local key = ARGV[1] .. ARGV[i]
  if rcall('HGET', key, 'gen') == ARGV[i + 1] then
    rcall('DEL', key)
    rcall('ZREM', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
return removed

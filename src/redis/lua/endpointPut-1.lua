--[[
  Writes one endpoint record, fenced: only when the stored record is still
  the one the caller read (`expected`; '' for "none": a create).
  KEYS[1] endpoints hash (id -> record JSON)
  ARGV[1] id   ARGV[2] expected JSON or ''   ARGV[3] new JSON
  Returns 1 when written, 0 when the stored record had moved.
]]
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if current ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1

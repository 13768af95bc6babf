--[[
  Pauses a key (a webhook endpoint, a tenant) until a time, fleet-wide: the
  later of the stored and the given time wins. Expired pauses are dropped as
  a writer passes by (readers never write), and the hash expires with its
  latest pause, so paused keys leave nothing once their pauses are over
  (bounded state: one field per key paused now). Tells every worker by pub/sub.
  KEYS[1] paused keys hash (key -> until, ms)
  ARGV[1] key   ARGV[2] until (ms)   ARGV[3] now (ms)   ARGV[4] channel
  Returns 1 when the pause was extended, 0 when a later one was there.
]]
local rcall = redis.call
local now, untilMs = tonumber(ARGV[3]), tonumber(ARGV[2])
local latest = untilMs
local fields = rcall('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local at = tonumber(fields[i + 1])
  if at <= now then rcall('HDEL', KEYS[1], fields[i]) elseif at > latest then latest = at end
end
local current = tonumber(rcall('HGET', KEYS[1], ARGV[1]) or '0')
if current >= untilMs then return 0 end
rcall('HSET', KEYS[1], ARGV[1], ARGV[2])
if latest > now then rcall('PEXPIRE', KEYS[1], latest - now) end
rcall('PUBLISH', ARGV[4], cjson.encode({key = ARGV[1], ['until'] = tonumber(ARGV[2])}))
return 1

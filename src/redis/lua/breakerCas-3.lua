--[[
  Compare-and-set of a breaker's state: writes only if the version is still
  the one read, keeps the set of non-closed keys, optionally clears the
  window, and publishes the transition. Returns 1 if written.
  KEYS: state, window, open-keys set.
  ARGV: expected version, state JSON, phase, breaker key, channel,
        message ('' for none), clear window (1/0).
]]
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'v', version + 1)
if ARGV[3] == 'closed' then
  redis.call('SREM', KEYS[3], ARGV[4])
else
  redis.call('SADD', KEYS[3], ARGV[4])
end
if ARGV[7] == '1' then redis.call('DEL', KEYS[2]) end
if ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1

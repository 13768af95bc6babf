--[[
  Compare-and-set of a breaker's state: writes only if the version is still
  the one read, keeps the set of non-closed keys, optionally clears the
  window (1: all of it, a reset; 2: its failures only, a close from
  half-open: the jobs it counted stay, so that the first failures after a
  close are weighed against them), and publishes the transition.
  Returns 1 if written.
  KEYS: state, window, open-keys set, isolated-keys set.
  ARGV: expected version, state JSON, phase, breaker key, channel,
        message ('' for none), clear window (0, 1 or 2),
        idleMs ('' = never expire), isolated (1/0).
  Bounded state: the state and the open-keys set expire idleMs after this
  write, unless the circuit is isolated by hand: its state never expires
  and its key is kept in the isolated-keys set (no TTL) until it is not.
]]
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'v', version + 1)
if ARGV[3] == 'closed' then
  redis.call('SREM', KEYS[3], ARGV[4])
else
  redis.call('SADD', KEYS[3], ARGV[4])
end
if ARGV[7] == '1' then
  redis.call('DEL', KEYS[2])
elseif ARGV[7] == '2' then
  local fields = redis.call('HKEYS', KEYS[2])
  for i = 1, #fields do
    if fields[i] == 'cf' or string.match(fields[i], ':f$') then redis.call('HDEL', KEYS[2], fields[i]) end
  end
end
local idle = tonumber(ARGV[8] or '')
if ARGV[9] == '1' then
  redis.call('PERSIST', KEYS[1])
  redis.call('SADD', KEYS[4], ARGV[4])
else
  redis.call('SREM', KEYS[4], ARGV[4])
  if idle then
    redis.call('PEXPIRE', KEYS[1], idle)
    redis.call('PEXPIRE', KEYS[3], idle)
  end
end
if ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1

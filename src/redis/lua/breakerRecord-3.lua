--[[
  Adds a batch of outcomes to a breaker's window (see includes/window) and
  returns the window's sums with the breaker's state and version.
  KEYS: window, state, known-keys set.
  ARGV: bucketMs, buckets (used only by a new window), total, failures,
        trailing failures, had a success (1/0), breaker key,
        time override in ms ('' = Redis's TIME; tests only),
        attempts in the batch ('' = total). Counting jobs, `total` and
        `failures` may be 0, and `failures` negative (a retry's success
        takes its job's failure back), while attempts still happened.
  Returns {total, failures, failures in a row, state JSON, version,
           bucketMs, buckets} (the geometry actually used).
]]
--- @include "includes/window"
local w = openWindow(KEYS[1], windowNow(ARGV[8]), tonumber(ARGV[1]), tonumber(ARGV[2]))
local total, failures, trailing = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cf = tonumber(w.other.cf or '0')
local attempts = tonumber(ARGV[9] or '') or total
if attempts > 0 then
  addToWindow(w, 't', total)
  addToWindow(w, 'f', failures)
  if ARGV[6] == '1' then
    cf = trailing
    redis.call('HSET', KEYS[1], 'cf', cf)
  else
    cf = redis.call('HINCRBY', KEYS[1], 'cf', trailing)
  end
  redis.call('SADD', KEYS[3], ARGV[7])
end
local state = redis.call('HMGET', KEYS[2], 's', 'v')
return {w.sums.t or 0, w.sums.f or 0, cf, state[1] or '', tonumber(state[2] or '0'),
        w.bucketMs, w.buckets}

--[[
  Ratio budget, as src/policy/budget/ratio-budget.ts specifies it: counts
  requests (`q`) and retries (`r`) in a window (see includes/window) and
  grants a retry while retries + 1 <= max(minRetries, ratio x requests),
  the SRE book's rule.
  KEYS: window hash.
  ARGV: bucketMs, buckets (used only by a new window), requests to add,
        take a retry (1/0), ratio, minRetries,
        time override in ms ('' = Redis's TIME; tests only).
  Returns {granted (1/0), requests, retries, bucketMs, buckets}.
]]
--- @include "includes/window"
local w = openWindow(KEYS[1], windowNow(ARGV[7]), tonumber(ARGV[1]), tonumber(ARGV[2]))
addToWindow(w, 'q', tonumber(ARGV[3]))
local granted = 0
if ARGV[4] == '1' then
  local requests, retries = w.sums.q or 0, w.sums.r or 0
  if retries + 1 <= math.max(tonumber(ARGV[6]), tonumber(ARGV[5]) * requests) then
    addToWindow(w, 'r', 1)
    granted = 1
  end
end
return {granted, w.sums.q or 0, w.sums.r or 0, w.bucketMs, w.buckets}

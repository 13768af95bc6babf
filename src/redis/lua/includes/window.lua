--[[
  The fleet's sliding windows, exactly as src/policy/window.ts defines them
  (a property test holds the two together): counters `<startMs>:<letter>`
  keyed by the bucket's absolute start, the geometry in `g` as
  `<bucketMs>:<buckets>`, and the stored geometry winning while the hash
  lives, so a writer with other options never deletes live buckets.
  Time is Redis's own clock, one for the whole fleet; a non-empty override
  exists for tests only.
]]
local function windowNow(override)
  if override ~= nil and override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Reads the window at `now`: drops counters that left it (all of them when
-- no geometry is stored: they cannot be placed in time) and sums the rest
-- by letter. `bucketMs`/`buckets` are the caller's, used only by a new window.
local function openWindow(key, now, bucketMs, buckets)
  local fields = redis.call('HGETALL', key)
  local w = {key = key, stored = false, sums = {}, other = {}}
  for i = 1, #fields, 2 do
    if fields[i] == 'g' then
      local b, n = string.match(fields[i + 1], '^(%d+):(%d+)$')
      if b and tonumber(b) >= 1 and tonumber(n) >= 1 then
        w.stored, bucketMs, buckets = true, tonumber(b), tonumber(n)
      end
    end
  end
  w.bucketMs, w.buckets = bucketMs, buckets
  w.current = math.floor(now / bucketMs) * bucketMs
  local cutoff = w.current - bucketMs * buckets
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    local start, letter = string.match(name, '^(%-?%d+):([a-z])$')
    if start == nil then
      if name ~= 'g' then w.other[name] = value end
    elseif w.stored and tonumber(start) > cutoff then
      w.sums[letter] = (w.sums[letter] or 0) + tonumber(value)
    else
      redis.call('HDEL', key, name)
    end
  end
  return w
end

-- Adds `count` to letter's counter in the current bucket. The first counter
-- gives a new window its geometry; every write keeps the hash alive for one
-- window and a bucket more.
local function addToWindow(w, letter, count)
  if count == 0 then return end
  if not w.stored then
    redis.call('HSET', w.key, 'g', string.format('%d:%d', w.bucketMs, w.buckets))
    w.stored = true
  end
  redis.call('HINCRBY', w.key, string.format('%d:%s', w.current, letter), count)
  redis.call('PEXPIRE', w.key, w.bucketMs * (w.buckets + 1))
  w.sums[letter] = (w.sums[letter] or 0) + count
end

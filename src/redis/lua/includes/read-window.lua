--[[
  Sums a bucketed window's counters (fields `<bucket>:<letter>`) by letter,
  deleting buckets that have left the window; fields of another shape come
  back as they are.
]]
local function readWindow(key, bucket, buckets)
  local sums, other = {}, {}
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local name, value = fields[i], tonumber(fields[i + 1])
    local b = tonumber(string.match(name, '^(%-?%d+):'))
    if b == nil then
      other[name] = value
    elseif b <= bucket - buckets then
      redis.call('HDEL', key, name)
    else
      local letter = string.sub(name, -1)
      sums[letter] = (sums[letter] or 0) + value
    end
  end
  return sums, other
end

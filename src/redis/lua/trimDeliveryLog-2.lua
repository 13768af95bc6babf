--[[
  One batch of a delivery-log retention pass, in one step: drops the entries
  that started before the cutoff, at most `limit`, from the index, the
  message and endpoint indexes and their own keys. Each member is
  `<entryId> <endpointId> <messageId>` (see `deliveryLogKeys`), which names
  every key the entry touches, all in the queue's slot.

  Locking as in trimDeadBatch-2.lua: a batch that removes `limit` holds the
  lock for the token for `lockMs`; a shorter one ends the pass and frees it;
  while another token holds it nothing is touched. A `limit` of 0 removes
  nothing and frees the lock if the token holds it.

  KEYS[1] the log's index (zset)   KEYS[2] the retention's lock
  ARGV[1] key base (`requeue:{q}:dlog:`)   ARGV[2] cutoff (ms)   ARGV[3] limit
  ARGV[4] the pass's token   ARGV[5] lockMs

  Returns {removed, 0}, or {-1, the lock's pttl} when another pass holds it.
]]
local rcall = redis.call
local holder = rcall('GET', KEYS[2])
if holder and holder ~= ARGV[4] then return {-1, rcall('PTTL', KEYS[2])} end
local limit = tonumber(ARGV[3])
local base = ARGV[1]
local old = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, limit)
for _, member in ipairs(old) do
  local id, endpoint, message = string.match(member, '^(%S+) (%S+) (%S+)$')
  if id then
    rcall('UNLINK', base .. 'e:' .. id)
    rcall('ZREM', base .. 'p:' .. endpoint, member)
    rcall('ZREM', base .. 'm:' .. message, member)
  end
  rcall('ZREM', KEYS[1], member)
end
if limit > 0 and #old >= limit then
  rcall('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
elseif holder then
  rcall('DEL', KEYS[2])
end
return {#old, 0}

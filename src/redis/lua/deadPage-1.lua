#!lua flags=no-writes
--[[
  One page of the DLQ index and what placing it needs, read at one instant
  (read only: Redis refuses a write here). Read in separate steps, a death
  landing between them shifted the page: `dlq list` dropped records it had read.
  KEYS[1] DLQ index (score: death time)
  ARGV[1] max score   ARGV[2] min score   ARGV[3] offset   ARGV[4] limit
  Returns {page as id, score, …; how many come before the page's first
  millisecond; the ids of its first millisecond; of its last}.
]]
local rcall = redis.call
local page = rcall('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES', 'LIMIT', ARGV[3], ARGV[4])
if #page == 0 then return {page, 0, {}, {}} end
local first = page[2]
local last = page[#page]
local above = rcall('ZCOUNT', KEYS[1], '(' .. first, ARGV[1])
local firstGroup = rcall('ZRANGEBYSCORE', KEYS[1], first, first)
local lastGroup = {}
if first ~= last then lastGroup = rcall('ZRANGEBYSCORE', KEYS[1], last, last) end
return {page, above, firstGroup, lastGroup}

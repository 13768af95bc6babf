--[[
  Makes one scheduled retry due now, fenced: only while the job is still in
  BullMQ's delayed set at the attempt the caller saw (its `ats`, attempts
  started: a retry that has run since, or a deferral, has moved it on), and
  not parked (a parked job waits for its key's slot: key-parking.ts). Its
  delayed score becomes Redis's now (BullMQ's encoding, due * 0x1000), and the
  marker is moved so a blocked worker wakes: the next fetch promotes it by
  BullMQ's own promotion, as any due retry.
  KEYS[1] delayed zset   KEYS[2] marker   KEYS[3] the job's hash   KEYS[4] meta
  ARGV[1] job id   ARGV[2] the attempts started the caller saw
  Returns 1 when moved, 0 when the job is not delayed, -1 when its attempt
  moved on, -2 when it is parked.
]]
local rcall = redis.call
--- @include "bullmq:includes/addDelayMarkerIfNeeded"
local score = rcall('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if (rcall('HGET', KEYS[3], 'ats') or '0') ~= ARGV[2] then return -1 end
local parked = rcall('HGET', KEYS[3], 'rqp')
if parked and tonumber(parked) == math.floor(tonumber(score) / 4096) then return -2 end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
rcall('ZADD', KEYS[1], now * 4096, ARGV[1])
if rcall('HEXISTS', KEYS[4], 'paused') == 0 then
  addDelayMarkerIfNeeded(KEYS[2], KEYS[1])
end
return 1

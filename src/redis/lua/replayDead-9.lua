--[[
  Replays dead jobs into their source queue, each in one step and fenced by
  its death generation: a record that is gone, or was replaced by a newer
  death since the caller read it, is left alone. A record comes back under
  the id the caller chose (its own, or its key's id when it is an id of the
  earlier encoding: src/scheduler/job-id.ts); if that is taken (the key was
  re-used; a keyless death's marker does not count), under the fresh id the
  caller gave, history kept. The record's hash becomes the job's hash again (renamed), its
  life counter goes up and the attempts start again. A flow's child takes
  its place among its parent's dependencies again, as BullMQ's retry of a
  failed child does (its `moveChildBackToParentDependencies`), under the id
  it comes back with: a parent still waiting for it completes when it does.
  A parent that died for its child waits for its children again.
  With a lane (ARGV[4] not empty) a job comes back not to the wait list,
  which BullMQ serves before every keyed job, but into the 'prioritized'
  set at the lane's fair turn (cost ARGV[5]: a light lane, such as a
  webhook endpoint's recovery, takes few turns while live keys wait, and
  every turn while none do). The job keeps its own dispatch key (`rqd`).

  KEYS[1] DLQ index   KEYS[2] wait list   KEYS[3] meta   KEYS[4] active list
  KEYS[5] marker      KEYS[6] events stream
  KEYS[7] prioritized zset   KEYS[8] BullMQ's priority counter   KEYS[9] fair zset
  ARGV[1] dead record key prefix   ARGV[2] job key prefix   ARGV[3] now (ms)
  ARGV[4] lane ('' for the wait list)   ARGV[5] the lane's cost (1 / weight)
  ARGV[6..] quads: id, generation, id to take, fresh id

  Returns a flat list of pairs: id, outcome, where outcome is the id the job
  got in the source queue, or '' when the record was skipped.
]]
--- @include "includes/fairPlace"
local rcall = redis.call
local lane = ARGV[4]
local paused = rcall('HEXISTS', KEYS[3], 'paused') == 1
local concurrency = rcall('HGET', KEYS[3], 'concurrency')
if not paused and concurrency then
  paused = rcall('LLEN', KEYS[4]) >= tonumber(concurrency)
end
local out = {}
local added = false
for i = 6, #ARGV, 4 do
  local id, gen, want, fresh = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local deadKey = ARGV[1] .. id
  local target = ''
  if rcall('HGET', deadKey, 'gen') == gen then
    target = want
    local source = ARGV[2] .. want
    if rcall('EXISTS', source) == 1 then
      -- The marker a keyless death leaves against re-sent adds is no job: the id is free.
      if rcall('HEXISTS', source, 'rqgone') == 1 then rcall('DEL', source) else target = fresh end
    end
    if rcall('EXISTS', ARGV[2] .. target) == 1 then
      target = ''
    else
      local jobKey = ARGV[2] .. target
      rcall('RENAME', deadKey, jobKey)
      rcall('HDEL', jobKey, 'dead', 'gen', 'processedOn', 'finishedOn', 'failedReason',
        'stacktrace', 'returnvalue', 'pb', 'stc')
      rcall('HSET', jobKey, 'timestamp', ARGV[3], 'delay', 0, 'rqo', rcall('HGET', jobKey, 'ats') or 0)
      rcall('HINCRBY', jobKey, 'rql', 1)
      local parentKey = rcall('HGET', jobKey, 'parentKey')
      if parentKey then
        local childKey = ARGV[2] .. id
        local deps = parentKey .. ':dependencies'
        -- Still a dependency (no failure option: the parent kept waiting), or
        -- recorded by the parent as failed or ignored. Unlike BullMQ, also when
        -- the parent's hash is gone: a parent dead-lettered for this child
        -- keeps its dependency keys, and once this child completes, the
        -- parent's own replay finds it done.
        local back = rcall('SREM', deps, childKey)
          + rcall('ZREM', parentKey .. ':unsuccessful', childKey)
          + rcall('HDEL', parentKey .. ':failed', childKey)
        if back > 0 then rcall('SADD', deps, jobKey) end
      end
      rcall('ZREM', KEYS[1], id)
      -- A flow's parent that died for a child (failParentOnFailure) waits for
      -- its children again, as BullMQ adds a parent: its failed children are
      -- its dependencies again, to be replayed. (BullMQ would not complete a
      -- parent with failed children: it would fail it.)
      local failedChildren = target == id and rcall('ZRANGE', jobKey .. ':unsuccessful', 0, -1) or {}
      if #failedChildren > 0 then
        for _, child in ipairs(failedChildren) do rcall('SADD', jobKey .. ':dependencies', child) end
        rcall('DEL', jobKey .. ':unsuccessful')
      end
      if #failedChildren > 0 and rcall('SCARD', jobKey .. ':dependencies') > 0 then
        rcall('ZADD', ARGV[2] .. 'waiting-children', ARGV[3], target)
        rcall('XADD', KEYS[6], 'MAXLEN', '~', 10000, '*', 'event', 'waiting-children', 'jobId', target)
      elseif lane ~= '' then
        -- Its `rqd` stays its own dispatch key (the endpoint): parking a
        -- saturated endpoint sweeps its recovered jobs with its live ones.
        rcall('HSET', jobKey, 'priority', 1)
        fairPlace(KEYS[7], KEYS[8], KEYS[9], target, lane, ARGV[5])
        rcall('XADD', KEYS[6], 'MAXLEN', '~', 10000, '*', 'event', 'waiting', 'jobId', target)
        added = true
      else
        rcall('LPUSH', KEYS[2], target)
        rcall('XADD', KEYS[6], 'MAXLEN', '~', 10000, '*', 'event', 'waiting', 'jobId', target)
        added = true
      end
    end
  end
  out[#out + 1] = id
  out[#out + 1] = target
end
if added and not paused then rcall('ZADD', KEYS[5], 0, '0') end
return out

-- The task queue's helpers: ready tasks, a task's fields, its end, and the
-- bounded upkeep of deferred tasks and dead workers (on the header of
-- wire/engine.lua, which names the keys).

-- @fn queue_ready
-- Task queues: make task `id` (of `name`) ready for a worker and wake one idle
-- worker of that name.
local function queue_ready(id, name, priority, seq)
  redis.call('ZADD', BASE .. ':pending:' .. name, -priority * 1099511627776 + seq, id)
  local wake = BASE .. ':wake:' .. name
  redis.call('RPUSH', wake, 1)
  redis.call('LTRIM', wake, -WAKE_TOKENS, -1)
end

-- @fn queue_fields
-- Task queues: the fields of task hash `task` as a flat list, without its
-- params when `skip_params` (the caller has them already).
local function queue_fields(task, skip_params)
  local flat, out = redis.call('HGETALL', task), {}
  for i = 1, #flat, 2 do
    if not (skip_params and flat[i] == 'params') then
      out[#out + 1] = flat[i]
      out[#out + 1] = flat[i + 1]
    end
  end
  return out
end

-- @fn queue_settle
-- Task queues: record the end of task `id`: TASK_DONE with its result (kept for
-- the task's "ttl" ms), or TASK_FAILED with an error message and traceback (kept
-- in :failed until retried or deleted). Wakes whoever waits for it: its :done
-- list lasts as long as the task (a failed task's until it is retried or
-- deleted, so that a query of it long after still reads its end at once).
local function queue_settle(id, status, text, trace)
  local task = BASE .. ':t:' .. id
  local ttl = tonumber(redis.call('HGET', task, 'ttl'))
  local done = BASE .. ':done:' .. id
  redis.call('RPUSH', done, 1)
  if status == TASK_DONE then
    redis.call('HSET', task, 'status', TASK_DONE, 'result', text, 'finished', NOW)
    redis.call('PEXPIRE', task, ttl)
    redis.call('PEXPIRE', done, ttl)
  else
    redis.call('HSET', task, 'status', TASK_FAILED, 'error', text, 'trace', trace, 'finished', NOW)
    redis.call('ZADD', BASE .. ':failed', NOW, id)
    redis.call('PERSIST', done)
  end
end

-- @fn queue_upkeep
-- Task queues: at most `limit` deferred tasks that are due become ready, and
-- at most `limit` tasks whose worker is presumed dead (deadline passed) are
-- delivered again, or failed after their last attempt (dead letter).
-- Returns {made ready, requeued ids, failed ids}. A task failed so is given the
-- error of WORKER_LOST (its class path first, as the worker writes a handler's
-- error) and that line as its traceback. A task delivered again keeps its
-- start times ("first", "started") and its workers.
local function queue_upkeep(limit)
  local sched, inflight = BASE .. ':sched', BASE .. ':inflight'
  local ready = due(sched, limit)
  for _, id in ipairs(ready) do
    redis.call('ZREM', sched, id)
    local got = redis.call('HMGET', BASE .. ':t:' .. id, 'name', 'priority', 'seq')
    if got[1] then
      queue_ready(id, got[1], tonumber(got[2]), tonumber(got[3]))
    end
  end
  local requeued, failed = {}, {}
  for _, id in ipairs(due(inflight, limit)) do
    redis.call('ZREM', inflight, id)
    local task = BASE .. ':t:' .. id
    local got = redis.call('HMGET', task, 'name', 'priority', 'seq', 'attempts', 'max')
    if got[1] and tonumber(got[4]) >= tonumber(got[5]) then
      local error = WORKER_LOST .. ': its worker died or stalled on each of its ' .. got[4] ..
        ' attempt(s)'
      queue_settle(id, TASK_FAILED, error, error .. '\n')
      failed[#failed + 1] = id
    elseif got[1] then
      redis.call('HSET', task, 'status', TASK_QUEUED)
      redis.call('HDEL', task, 'worker')
      queue_ready(id, got[1], tonumber(got[2]), tonumber(got[3]))
      requeued[#requeued + 1] = id
    end
  end
  return {#ready, requeued, failed}
end

-- @fn queue_next_due
-- Task queues: ms until the next deferred task or deadline is due (-1: none).
local function queue_next_due()
  local next_ms = -1
  for _, zset in ipairs({BASE .. ':sched', BASE .. ':inflight'}) do
    local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')[2]
    if first then
      local ms = math.max(0, tonumber(first) - NOW)
      if next_ms < 0 or ms < next_ms then
        next_ms = ms
      end
    end
  end
  return next_ms
end

-- queue_admin: an operator's change to one task. args[2]
-- 'retry' (a failed task is queued again with its attempts, workers, start
-- times, progress and deferral reset, and no query counted as waiting for it:
-- a query of a failed task has its end at once) or 'delete' (a task that is
-- not running is removed). args[3] id. Returns 1 if done, 0 if the task was
-- not in a state that allows it.
local what, id = args[2], args[3]
local task = BASE .. ':t:' .. id
local got = redis.call('HMGET', task, 'status', 'name', 'priority', 'seq')
local status = got[1]
if what == 'retry' then
  if status ~= TASK_FAILED then
    return 0
  end
  redis.call('ZREM', BASE .. ':failed', id)
  redis.call('HSET', task, 'status', TASK_QUEUED, 'attempts', 0)
  redis.call('HDEL', task, 'result', 'error', 'trace', 'finished', 'worker', 'workers', 'current',
    'total', 'started', 'first', 'run_at', 'queries')
  redis.call('PERSIST', task)
  redis.call('DEL', BASE .. ':done:' .. id)
  queue_ready(id, got[2], tonumber(got[3]), tonumber(got[4]))
  return 1
end
if not status or status == TASK_RUNNING then
  return 0
end
redis.call('ZREM', BASE .. ':pending:' .. got[2], id)
redis.call('ZREM', BASE .. ':sched', id)
redis.call('ZREM', BASE .. ':failed', id)
redis.call('DEL', task, BASE .. ':done:' .. id)
return 1

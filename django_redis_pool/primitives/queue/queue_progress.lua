-- queue_progress: a running task's progress. args[2] id, args[3] worker id,
-- args[4] attempt, args[5] current, args[6] total. Returns 1, or 0 if that
-- delivery no longer runs the task.
local task = BASE .. ':t:' .. args[2]
local got = redis.call('HMGET', task, 'status', 'worker', 'attempts')
if got[1] ~= TASK_RUNNING or got[2] ~= args[3] or got[3] ~= args[4] then
  return 0
end
redis.call('HSET', task, 'current', args[5], 'total', args[6])
return 1

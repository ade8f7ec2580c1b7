-- queue_finish: a worker reports a task's end. args[2] id, args[3] worker id,
-- args[4] its attempt, args[5] TASK_DONE | TASK_FAILED, args[6] result (JSON
-- text) or error message, args[7] traceback.
-- Only the delivery that holds the task (same worker and attempt, still
-- running) may finish it: a worker presumed dead whose task was delivered again
-- changes nothing. Returns the time it stored as the task's end (ms on the
-- Redis clock), or 0 for such a stale report.
local id, worker, attempt, status = args[2], args[3], args[4], args[5]
local task = BASE .. ':t:' .. id
local got = redis.call('HMGET', task, 'status', 'worker', 'attempts')
if got[1] ~= TASK_RUNNING or got[2] ~= worker or got[3] ~= attempt then
  return 0
end
redis.call('ZREM', BASE .. ':inflight', id)
queue_settle(id, status, args[6], args[7])
return NOW

-- queue_take: a worker takes the next task of the names it handles, atomically
-- into the in-flight set with a deadline (its visibility timeout).
-- args[2] worker id, args[3] visibility ms, args[4..] task names.
-- First, bounded upkeep: deferred tasks that are due become ready, and tasks
-- of dead workers (deadline passed) go back to the queue or, after their last
-- attempt, to the failed set.
-- Returns {id, name, params, attempts, the task's other fields as now stored
-- (a flat list)} or, with nothing to take, the ms until the next deferred task
-- or deadline is due (-1: none), for the idle wait. "started" is this
-- delivery's start, "first" the first delivery's (kept until a retry).
local worker, visibility = args[2], tonumber(args[3])
queue_upkeep(UPKEEP_LIMIT)
local best, best_name, best_score
for i = 4, #args do
  local head = redis.call('ZRANGE', BASE .. ':pending:' .. args[i], 0, 0, 'WITHSCORES')
  if head[1] and (not best_score or tonumber(head[2]) < best_score) then
    best, best_name, best_score = head[1], args[i], tonumber(head[2])
  end
end
if not best then
  return queue_next_due()
end
local task = BASE .. ':t:' .. best
redis.call('ZREM', BASE .. ':pending:' .. best_name, best)
-- (read, not HINCRBY: a count someone else overwrote with text must not stop
-- the script after the task left :pending; a key that is not a hash is
-- not a task: it is dropped from the queue, and its id given for the log)
if redis.call('TYPE', task)['ok'] ~= 'hash' then
  return {best, best_name, false, 0, {}}
end
local attempts = (tonumber(redis.call('HGET', task, 'attempts')) or 0) + 1
redis.call('HSET', task, 'attempts', attempts)
local before = redis.call('HGET', task, 'workers')
redis.call('HSET', task, 'status', TASK_RUNNING, 'worker', worker, 'started', NOW, 'workers',
  before and before .. '\n' .. worker or worker)
redis.call('HDEL', task, 'current', 'total')  -- (a dead delivery's progress is not this one's)
redis.call('HSETNX', task, 'first', NOW)
redis.call('ZADD', BASE .. ':inflight', NOW + visibility, best)
return {best, best_name, redis.call('HGET', task, 'params'), attempts, queue_fields(task, true)}

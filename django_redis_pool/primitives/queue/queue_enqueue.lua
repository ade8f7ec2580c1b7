-- queue_enqueue: add a task. args[2] id, args[3] name, args[4] params (JSON
-- text), args[5] priority, args[6] run at (ms on the Redis clock; -1: now),
-- args[7] max attempts, args[8] ms a finished task is kept, args[9] '1' when a
-- query enqueues it to wait for its end ('' : enqueue/submit, which does not).
-- An id already there (whatever its state) is left alone: a retried enqueue
-- changes nothing twice. What is counted for a withdrawal is kept in the
-- task's hash (never read as the task): "queries", the queries that wait for
-- it (each query that ends un-counts itself: queue_withdraw, queue_collect),
-- and "keep", set once anyone enqueued it without waiting, so that no query
-- that gives up withdraws a task somebody else asked for.
-- Returns {1 if added (0 if the id was there), the task's fields as stored, a
-- flat list}: what a read right after would give, so that the caller needs no
-- second round trip. An added task's params (the caller's own) are left out.
local id, name, params, priority, run_at = args[2], args[3], args[4], tonumber(args[5]),
  tonumber(args[6])
local task = BASE .. ':t:' .. id
local waits = args[9] == '1'
local added = 0
if redis.call('EXISTS', task) == 0 then
  added = 1
  local seq = redis.call('INCR', K_SEQ)
  redis.call('HSET', task, 'name', name, 'params', params, 'status', TASK_QUEUED, 'attempts', 0,
    'priority', priority, 'seq', seq, 'enqueued', NOW, 'max', args[7], 'ttl', args[8])
  redis.call('SADD', BASE .. ':names', name)
  if run_at > NOW then
    redis.call('HSET', task, 'run_at', run_at)
    redis.call('ZADD', BASE .. ':sched', run_at, id)
    -- idle workers wake up for the earliest deferred task: tell them it moved
    redis.call('RPUSH', BASE .. ':wake:' .. name, 0)
    redis.call('LTRIM', BASE .. ':wake:' .. name, -WAKE_TOKENS, -1)
  else
    queue_ready(id, name, priority, seq)
  end
end
if waits then
  redis.call('HINCRBY', task, 'queries', 1)
else
  redis.call('HSET', task, 'keep', 1)
end
return {added, queue_fields(task, added == 1)}

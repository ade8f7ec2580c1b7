-- queue_withdraw: a query gives up waiting for task args[2] (timed out, or
-- interrupted): it un-counts itself, and takes the task back if no worker has
-- started it, no other query waits for it and nobody enqueued it without
-- waiting (see queue_enqueue). Returns 1 if it was withdrawn (and deleted), 0
-- if it stays: running or finished, started before and waiting to be delivered
-- again (its worker died: the delivery it was promised goes on, so that what
-- was begun is finished), or wanted by somebody else.
local id = args[2]
local task = BASE .. ':t:' .. id
local got = redis.call('HMGET', task, 'status', 'name', 'attempts', 'keep')
if not got[1] then
  return 0
end
local others = redis.call('HINCRBY', task, 'queries', -1)
if got[1] ~= TASK_QUEUED or got[3] ~= '0' or got[4] or others > 0 then
  return 0
end
redis.call('ZREM', BASE .. ':pending:' .. got[2], id)
redis.call('ZREM', BASE .. ':sched', id)
redis.call('DEL', task, BASE .. ':done:' .. id)
return 1

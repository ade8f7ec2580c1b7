-- queue_collect: a query read the end of task args[2]: it un-counts itself
-- and returns the task's fields (a flat list; empty: there is none, e.g. its
-- result expired). With args[3] '1' (query(once=True)) an ended task is then
-- deleted, unless another query still waits to read it (see queue_enqueue).
local id = args[2]
local task = BASE .. ':t:' .. id
local flat = redis.call('HGETALL', task)
if #flat == 0 then
  return flat
end
local others = redis.call('HINCRBY', task, 'queries', -1)
if args[3] == '1' and others <= 0 then
  local status = redis.call('HGET', task, 'status')
  if status == TASK_DONE or status == TASK_FAILED then
    redis.call('ZREM', BASE .. ':failed', id)
    redis.call('DEL', task, BASE .. ':done:' .. id)
  end
end
return flat

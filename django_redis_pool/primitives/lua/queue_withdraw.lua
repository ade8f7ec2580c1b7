-- queue_withdraw: take back a task no worker has started. args[2] id. Returns
-- 1 if it was withdrawn (and deleted), 0 if it is running or finished, or was
-- started before and waits to be delivered again (its worker died: the
-- delivery it was promised goes on, so that what was begun is finished).
local id = args[2]
local task = BASE .. ':t:' .. id
local got = redis.call('HMGET', task, 'status', 'name', 'attempts')
if got[1] ~= TASK_QUEUED or got[3] ~= '0' then
  return 0
end
redis.call('ZREM', BASE .. ':pending:' .. got[2], id)
redis.call('ZREM', BASE .. ':sched', id)
redis.call('DEL', task, BASE .. ':done:' .. id)
return 1

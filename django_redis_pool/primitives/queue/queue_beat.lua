-- queue_beat: a worker's heartbeat. args[2] worker id, args[3] ms its listening
-- lasts, args[4] visibility ms, args[5] its task names joined by "\n", args[6..]
-- the ids of the tasks it runs now (their deadlines move to now + visibility).
-- Returns how many of those it still holds. Its names join :names, where
-- counts() looks for live workers (a worker that listens before any task of
-- its names was enqueued is live too).
local worker, alive, visibility = args[2], tonumber(args[3]), tonumber(args[4])
for name in string.gmatch(args[5], '[^\n]+') do
  redis.call('SADD', BASE .. ':names', name)
  local live = BASE .. ':live:' .. name
  redis.call('ZADD', live, NOW + alive, worker)
  redis.call('ZREMRANGEBYSCORE', live, '-inf', NOW)
end
local held = 0
for i = 6, #args do
  local task = BASE .. ':t:' .. args[i]
  if redis.call('HGET', task, 'worker') == worker and redis.call('HGET', task, 'status') == TASK_RUNNING then
    redis.call('ZADD', BASE .. ':inflight', 'XX', NOW + visibility, args[i])
    held = held + 1
  end
end
return held

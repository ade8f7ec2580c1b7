-- queue_read: reads, on the Redis clock. args[2] what:
--   'task' args[3] id -> the task's fields as a flat list (empty: none);
--   'live' args[3] name -> live workers listening for that name;
--   'counts' -> {pending, in flight, scheduled, failed, live workers, names};
--   'failed' args[3] offset args[4] count -> {total, {id, name, error, ...}}.
local what = args[2]
if what == 'task' then
  return redis.call('HGETALL', BASE .. ':t:' .. args[3])
elseif what == 'live' then
  return redis.call('ZCOUNT', BASE .. ':live:' .. args[3], '(' .. NOW, '+inf')
elseif what == 'counts' then
  local names = redis.call('SMEMBERS', BASE .. ':names')
  local pending, workers = 0, {}
  for _, name in ipairs(names) do
    pending = pending + redis.call('ZCARD', BASE .. ':pending:' .. name)
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', BASE .. ':live:' .. name, '(' .. NOW, '+inf')) do
      workers[w] = true
    end
  end
  local live = 0
  for _ in pairs(workers) do
    live = live + 1
  end
  return {pending, redis.call('ZCARD', BASE .. ':inflight'), redis.call('ZCARD', BASE .. ':sched'),
    redis.call('ZCARD', BASE .. ':failed'), live, #names}
elseif what == 'failed' then
  local failed = BASE .. ':failed'
  local ids = redis.call('ZREVRANGE', failed, tonumber(args[3]), tonumber(args[3]) + tonumber(args[4]) - 1)
  local out = {}
  for _, id in ipairs(ids) do
    local got = redis.call('HMGET', BASE .. ':t:' .. id, 'name', 'error', 'attempts', 'finished')
    out[#out + 1] = id
    out[#out + 1] = got[1] or ''
    out[#out + 1] = got[2] or ''
    out[#out + 1] = got[3] or '0'
    out[#out + 1] = got[4] or '0'
  end
  return {redis.call('ZCARD', failed), out}
end
return redis.error_reply('unknown queue read ' .. tostring(what))

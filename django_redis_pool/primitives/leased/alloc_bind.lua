-- alloc_bind: soft bindings. args[2] 'set' | 'unset' | 'get', args[3] name,
-- args[4] key ('set'), args[5] ms ('set'). 'get' returns the bound key (nil
-- once the binding expired), 'set' 1, 'unset' 1 if there was a binding.
local what, name = args[2], args[3]
local K_BIND, K_BINDEXP = BASE .. ':bind', BASE .. ':bindexp'
if what == 'get' then
  if tonumber(redis.call('ZSCORE', K_BINDEXP, name) or 0) > NOW then
    return redis.call('HGET', K_BIND, name)
  end
  return nil
elseif what == 'set' then
  redis.call('HSET', K_BIND, name, args[4])
  redis.call('ZADD', K_BINDEXP, NOW + tonumber(args[5]), name)
  return 1
end
redis.call('ZREM', K_BINDEXP, name)
return redis.call('HDEL', K_BIND, name)

-- alloc_malloc: hand out a key at once (an allocator never queues).
-- args[2] (packed): request token|lease ms (-1: none)|soft-binding ms;
-- args[3] soft-binding name ('' none); args[4] holder.
-- "alloc": the key is leased to the holder (a retried request gets the same
-- lease); "shared": the key goes to the back of its priority and is not leased.
-- With a name: the key bound to it if that key is free and healthy, else the
-- next one, and the name is bound to the key handed out.
-- Returns {key, lease record} ("shared": {key, fence}) or 'none'.
local token, lease_ms, bind_ms = string.match(args[2], '^([^|]*)|([^|]*)|(.*)$')
local name, holder = args[3], args[4]
local K_BIND, K_BINDEXP = BASE .. ':bind', BASE .. ':bindexp'
if MODE == 'alloc' then
  local state, key, raw = token_state(token)
  if state == 'granted' and raw then
    return {key, raw}
  end
  reclaim_due()
end
tend_keys(RECLAIM_LIMIT)
local key, popped
if name ~= '' then
  local bound = redis.call('HGET', K_BIND, name)
  if bound and tonumber(redis.call('ZSCORE', K_BINDEXP, name) or 0) > NOW
      and redis.call('ZSCORE', K_AVAIL, bound) then
    key = bound
  end
end
local K_KEXP = BASE .. ':kexp'
for _ = 1, SKIP_LIMIT do
  if not key then
    if MODE == 'shared' then
      key = redis.call('ZRANGE', K_AVAIL, 0, 0)[1]
    else
      key, popped = redis.call('ZPOPMIN', K_AVAIL)[1], true
    end
    if not key then
      return 'none'
    end
  end
  -- a key whose lifetime ended (beyond what tend_keys removed) is dropped
  local ends = redis.call('ZSCORE', K_KEXP, key)
  if not ends or tonumber(ends) > NOW then
    break
  end
  drop_key(key)
  key, popped = nil, false
end
if not key then
  return 'none'
end
if name ~= '' then
  redis.call('HSET', K_BIND, name, key)
  redis.call('ZADD', K_BINDEXP, NOW + tonumber(bind_ms), name)
end
if MODE == 'shared' then
  return {key, make_available(key)}  -- to the back of its priority; its turn is the fence
end
if not popped then
  redis.call('ZREM', K_AVAIL, key)
end
return {key, grant(key, token, holder, tonumber(lease_ms), false)}

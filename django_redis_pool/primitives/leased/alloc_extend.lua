-- alloc_extend: add keys to an allocator, or update the ones already there.
-- args[2] lifetime ms (-1: they stay for ever), args[3] priority, args[4..]
-- keys. A free key keeps its place in the free order (moved to its new
-- priority, if that changed); a held key keeps its lease and an unhealthy one
-- its cooldown. Returns how many keys were new.
local life, priority = tonumber(args[2]), tonumber(args[3])
local expires = life < 0 and -1 or NOW + life
local K_KEYS = BASE .. ':keys'
local added = 0
for i = 4, #args do
  local key = args[i]
  local before = redis.call('HGET', K_KEYS, key)
  local sick = before and string.match(before, '|([^|]*)$') or '0'
  added = added + redis.call('HSET', K_KEYS, key, priority .. '|' .. expires .. '|' .. sick)
  if expires == -1 then
    redis.call('ZREM', BASE .. ':kexp', key)
  else
    redis.call('ZADD', BASE .. ':kexp', expires, key)
  end
  if redis.call('ZSCORE', K_LEASES, key) then
    -- (its free reads the meta while it is out of rotation, to see the cooldown)
    set_held_priority(key, tonumber(sick) > NOW and '' or tostring(priority))
  else
    keep_available(key, priority)
  end
end
if expires ~= -1 then
  redis.call('HDEL', K_INFO, F_DUE)
end
return added

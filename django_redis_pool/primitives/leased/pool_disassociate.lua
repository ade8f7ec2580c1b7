-- pool_disassociate: remove a resource, available or leased (its holder's later
-- release then returns false). args[2] resource. Returns 1 if it was there.
local res = args[2]
local rec = decode(redis.call('HGET', K_INFO, res))
redis.call('HDEL', K_INFO, res)
if redis.call('ZREM', K_AVAIL, res) == 1 then
  return 1
end
if redis.call('ZREM', K_LEASES, res) == 1 then
  if rec then
    redis.call('HDEL', K_INFO, '\0' .. rec.t)
  end
  return 1
end
return 0

-- disassociate: remove a resource, available or leased (its holder's later
-- release then returns false). ARGV[2] resource. Returns 1 if it was there.
local RES = ARGV[2]
local rec = lease_record(RES)
redis.call('HDEL', K_INFO, RES)
if redis.call('ZREM', K_AVAIL, RES) == 1 then
  return 1
end
if redis.call('ZREM', K_LEASES, RES) == 1 then
  if rec then
    redis.call('HDEL', K_TOK, rec.t)
  end
  return 1
end
return 0

-- associate: add a resource to the pool (straight to the head waiter if any).
-- ARGV[2] resource. Returns 1 if added, 0 if already in the pool.
local RES = ARGV[2]
if redis.call('ZSCORE', K_AVAIL, RES) or redis.call('ZSCORE', K_LEASES, RES) then
  return 0
end
redis.call('HDEL', K_INFO, RES)
put_back(RES)
return 1

-- pool_associate: add resources to the pool (each straight to the head waiter
-- if any). args[2..] resource ids. Returns how many were added (ids already in
-- the pool are left alone).
local added = 0
for i = 2, #args do
  local res = args[i]
  if not (redis.call('ZSCORE', K_AVAIL, res) or redis.call('ZSCORE', K_LEASES, res)) then
    redis.call('HDEL', K_INFO, res)
    put_back(res)
    added = added + 1
  end
end
return added

-- alloc_gc: bounded upkeep of an allocator, at most args[2] of each: expired
-- leases reclaimed, keys whose lifetime ended removed, keys whose cooldown
-- ended brought back, expired soft bindings dropped.
-- Returns {reclaimed {key, record, ...}, keys removed, keys healed, unbound}.
local limit = tonumber(args[2])
local reclaimed = {}
if MODE == MODE_ALLOC then
  reclaimed = reclaim(limit)
end
local expired, healed = expire_and_heal_keys(limit)
local names = due(BASE .. ':bindexp', limit)
for _, name in ipairs(names) do
  redis.call('ZREM', BASE .. ':bindexp', name)
  redis.call('HDEL', BASE .. ':bind', name)
end
return {reclaimed, expired, healed, #names}

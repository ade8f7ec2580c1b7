-- set_max_size: ARGV[2] the number of slots, ARGV[3] '1' to set it only if none
-- is set yet. A larger size serves queued waiters at once; a smaller one evicts
-- nobody (new acquires wait until the holders are below it).
-- Returns 1 if the size was set.
local SIZE, ONLY_IF_UNSET = ARGV[2], ARGV[3] == '1'
if ONLY_IF_UNSET and redis.call('GET', K_MAX) then
  return 0
end
redis.call('SET', K_MAX, SIZE)
reclaim(RECLAIM_LIMIT)
pump()
return 1

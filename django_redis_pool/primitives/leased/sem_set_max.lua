-- sem_set_max: args[2] the number of slots, args[3] '1' to set it only if none
-- is set yet. A larger size serves queued waiters at once; a smaller one evicts
-- nobody (new acquires wait until the holders are below it).
-- Returns 1 if the size was set.
if args[3] == '1' and redis.call('GET', K_MAX) then
  return 0
end
redis.call('SET', K_MAX, args[2])
reclaim(RECLAIM_LIMIT)
serve_waiters()
return 1

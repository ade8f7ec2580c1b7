-- ratelimit_reset: forget a limited key (its bucket is full again).
-- args[2] 'key' (BASE: the limited key's own base): delete its TAT; returns
-- 1 if it had state, else 0. args[2] 'index' (BASE: the limiter's base),
-- args[3] the limited key: drop it from the index; returns 1.
if args[2] == 'index' then
  redis.call('ZREM', BASE .. ':index', args[3])
  return 1
end
return redis.call('DEL', BASE .. ':tat')

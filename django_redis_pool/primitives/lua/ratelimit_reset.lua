-- ratelimit_reset: forget a limited key (its bucket is full again).
-- args[2] the limited key. Returns 1 if it had state, else 0.
redis.call('ZREM', BASE .. ':index', args[2])
return redis.call('DEL', BASE .. ':k:' .. args[2])

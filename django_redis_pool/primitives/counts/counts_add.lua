-- counts_add: add one process's counts of the primitive (primitives/counts.py)
-- into its totals (:counts) and into the current minute of the Redis clock
-- (:minute:<unix minute>, dropped HISTORY_MS later). The minute also keeps the
-- most holds (a semaphore's: permits held) and waiters seen by a flush in it
-- (held_max, waiting_max): every process with something to count flushes
-- every few seconds, so they sample the minute's peak.
-- A rate limiter's flush also carries the keys it decided on and the TAT
-- each was left with: they go into its :index (the latest TAT of each kept),
-- which is then trimmed of full buckets, held to RATE_INDEX_LIMIT entries
-- (the fullest dropped) and set to expire when its latest bucket is full.
-- args[2]: the request id (a retried run adds nothing twice); then field,
-- increment pairs; then, for a rate limiter, 'index' and key, TAT pairs.
-- Returns 1, or 0 if this request was added already.
if remembered(args[2]) then
  return 0
end
local minute = BASE .. ':minute:' .. math.floor(NOW / 60000)
local i = 3
while i <= #args and args[i] ~= 'index' do
  redis.call('HINCRBY', BASE .. ':counts', args[i], args[i + 1])
  redis.call('HINCRBY', minute, args[i], args[i + 1])
  i = i + 2
end
if i < #args then
  local index = BASE .. ':index'
  for j = i + 1, #args, 2 do
    redis.call('ZADD', index, 'GT', args[j + 1], args[j])
  end
  redis.call('ZREMRANGEBYSCORE', index, '-inf', string.format('%d', NOW_US))
  local size = redis.call('ZCARD', index)
  if size > RATE_INDEX_LIMIT then
    redis.call('ZREMRANGEBYRANK', index, 0, size - RATE_INDEX_LIMIT - 1)
  end
  local latest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')[2]
  if latest then
    redis.call('PEXPIRE', index, math.ceil((tonumber(latest) - NOW_US) / 1000))
  end
end
if MODE ~= MODE_QUEUE and MODE ~= MODE_RATELIMIT then
  local peaks = redis.call('HMGET', minute, 'held_max', 'waiting_max')
  local held, waiting = redis.call('ZCARD', K_LEASES), redis.call('ZCARD', K_WAITQ)
  if MODE == MODE_SEM then
    held = held + (tonumber(redis.call('HGET', K_INFO, F_EXTRA)) or 0)
  end
  if held > (tonumber(peaks[1]) or -1) then
    redis.call('HSET', minute, 'held_max', held)
  end
  if waiting > (tonumber(peaks[2]) or -1) then
    redis.call('HSET', minute, 'waiting_max', waiting)
  end
end
redis.call('PEXPIRE', minute, HISTORY_MS)
remember(args[2])
return 1

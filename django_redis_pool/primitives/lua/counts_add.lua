-- counts_add: add one process's counts of the primitive (primitives/counts.py)
-- into its totals (:counts) and into the current minute of the Redis clock
-- (:minute:<unix minute>, dropped HISTORY_MS later). The minute also keeps the
-- most holds (a semaphore's: permits held) and waiters seen by a flush in it
-- (held_max, waiting_max): every process with something to count flushes
-- every few seconds, so they sample the minute's peak.
-- args[2]: the request id (a retried run adds nothing twice); then field,
-- increment pairs. Returns 1, or 0 if this request was added already.
if remembered(args[2]) then
  return 0
end
local minute = BASE .. ':minute:' .. math.floor(NOW / 60000)
for i = 3, #args, 2 do
  redis.call('HINCRBY', BASE .. ':counts', args[i], args[i + 1])
  redis.call('HINCRBY', minute, args[i], args[i + 1])
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

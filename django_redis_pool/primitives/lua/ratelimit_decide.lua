-- ratelimit_decide: one decision of a rate limiter (primitives/ratelimit.py):
-- GCRA on the Redis clock, in µs. A decision of `cost` units passes iff
-- max(TAT, now) + cost * interval - now <= burst * interval; then the key's
-- TAT advances by cost * interval. A caller that may wait `wait` µs (-1: for
-- ever) and whose turn comes within it reserves that turn here (the TAT
-- advances as if it passed then) and is told how long to sleep; one whose
-- turn comes later is refused, reserving nothing.
-- args[2] packed: "interval µs|burst|cost|wait µs|limited key" (the key last:
-- it may hold "|").
-- Returns one string (one reply to read, not six): "1 passed (0 refused)|whole
-- units left when it passes|µs it waits (refused: µs until this cost would
-- pass)|µs until the bucket is full again (from when it passes)|now µs|the
-- TAT it set (0: none)".
local interval, burst, cost, wait, key =
  string.match(args[2], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
interval, burst, cost, wait = interval + 0, burst + 0, cost + 0, wait + 0
local k = BASE .. ':k:' .. key
local tat = (redis.call('GET', k) or NOW_US) + 0
if tat < NOW_US then
  tat = NOW_US
end
local window = burst * interval
local new = tat + cost * interval
local delay = new - NOW_US - window
if delay > 0 and wait >= 0 and delay > wait then
  local left = math.max(0, math.floor((window - tat + NOW_US) / interval))
  return string.format('0|%d|%d|%d|%d|0', left, delay, tat - NOW_US, NOW_US)
end
if delay < 0 then
  delay = 0
end
local text = string.format('%d', new)
redis.call('SET', k, text, 'PX', string.format('%d', math.ceil((new - NOW_US) / 1000)))
-- The index grows only by a new member, and every RATE_TRIM_EVERY new
-- members it is trimmed of full buckets and held to its limit: a key decided
-- on again is an update in place, not a removal and an insertion (a stale
-- entry is never read as live: the reads take scores above now). A new index
-- starts with a member longer than a small sorted set's (zset-max-listpack-
-- value, 64 bytes by default) and a full bucket's score: Redis keeps it a
-- skip list, not a listpack scanned whole by every insertion; the first trim
-- drops that member, and the index stays a skip list while it exists. Its
-- 1,001 characters are more than a key may have (MAX_KEY_LENGTH in
-- ratelimit.py), so it is never one.
local index = BASE .. ':index'
if redis.call('ZADD', index, text, key) == 1 then
  local size = redis.call('ZCARD', index)
  if size == 1 then
    redis.call('ZADD', index, '0', string.rep('-', 1001))
  elseif size % RATE_TRIM_EVERY == 0 then
    redis.call('ZREMRANGEBYSCORE', index, '-inf', string.format('%d', NOW_US))
    size = redis.call('ZCARD', index)
    if size > RATE_INDEX_LIMIT then
      redis.call('ZREMRANGEBYRANK', index, 0, size - RATE_INDEX_LIMIT - 1)
    end
  end
end
local debt = new - NOW_US - delay
return string.format('1|%d|%d|%d|%d|%s', math.floor((window - debt) / interval), delay, debt,
  NOW_US, text)

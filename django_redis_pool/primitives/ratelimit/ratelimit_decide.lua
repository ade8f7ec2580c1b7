-- ratelimit_decide: one decision of a rate limiter (primitives/ratelimit.py):
-- GCRA on the Redis clock, in µs. A decision of `cost` units passes iff
-- max(TAT, now) + cost * interval - now <= burst * interval; then the key's
-- TAT advances by cost * interval. A caller that may wait `wait` ms (the wait
-- as every operation gets it: -1 for ever, 0 do not wait, n > 0 ms left) and
-- whose turn comes within it reserves that turn here (the TAT
-- advances as if it passed then) and is told how long to sleep; one whose
-- turn comes later is refused, reserving nothing.
-- BASE is the limited key's own base (its own hash tag: each limited key may
-- live in its own Redis Cluster slot); its TAT is BASE .. ':tat'. The
-- limiter's index of busy keys is kept off this path (counts_add.lua).
-- args[2] packed (primitives/wire.py, ratelimit_decide): "interval µs|burst|
-- cost|wait ms".
-- Returns one string (one reply to read, not six): "1 passed (0 refused)|whole
-- units left when it passes|µs it waits (refused: µs until this cost would
-- pass)|µs until the bucket is full again (from when it passes)|now µs|the
-- TAT it set (0: none)".
local interval, burst, cost, wait = string.match(args[2], '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
interval, burst, cost, wait = interval + 0, burst + 0, cost + 0, wait * 1000
local k = BASE .. ':tat'
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
local debt = new - NOW_US - delay
return string.format('1|%d|%d|%d|%d|%s', math.floor((window - debt) / interval), delay, debt,
  NOW_US, text)

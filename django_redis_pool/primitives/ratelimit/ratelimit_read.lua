-- ratelimit_read: what a rate limiter holds now, changing nothing.
-- args[2] selects:
--   'status' (BASE: a limited key's own base): {its debt in µs (TAT - now,
--            0 when full)}
--   'busiest' (BASE: the limiter's base), args[3] a limit: {now µs, key, TAT
--            µs, ...} for at most that many keys of the index whose TAT is
--            after now, the latest first (each is read again from its own
--            key by the caller: the index is written off the decisions'
--            path, so it may be a few seconds behind)
--   'count' (BASE: the limiter's base): {how many indexed keys are not full now}
local after = '(' .. string.format('%d', NOW_US)
if args[2] == 'status' then
  local tat = tonumber(redis.call('GET', BASE .. ':tat')) or NOW_US
  return {math.max(0, tat - NOW_US)}
elseif args[2] == 'busiest' then
  local out = redis.call('ZREVRANGEBYSCORE', BASE .. ':index', '+inf', after, 'WITHSCORES',
    'LIMIT', 0, tonumber(args[3]))
  table.insert(out, 1, NOW_US)
  return out
end
return {redis.call('ZCOUNT', BASE .. ':index', after, '+inf')}

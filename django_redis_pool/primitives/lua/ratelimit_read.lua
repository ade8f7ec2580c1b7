-- ratelimit_read: what a rate limiter's keys hold now, changing nothing.
-- args[2] selects:
--   'status', args[3] a limited key: {its debt in µs (TAT - now, 0 when full)}
--   'busiest', args[3] a limit: {key, debt µs, ...} for the keys with the
--              largest debts now (the fewest units left), largest first, at
--              most that many; each checked against its own key (one that
--              vanished is left out)
--   'count': {how many keys are not full now}
local index = BASE .. ':index'
local after = '(' .. string.format('%d', NOW_US)
if args[2] == 'status' then
  local tat = tonumber(redis.call('GET', BASE .. ':k:' .. args[3])) or NOW_US
  return {math.max(0, tat - NOW_US)}
elseif args[2] == 'busiest' then
  local out = {}
  local keys = redis.call('ZREVRANGEBYSCORE', index, '+inf', after, 'LIMIT', 0, tonumber(args[3]))
  for _, key in ipairs(keys) do
    local tat = tonumber(redis.call('GET', BASE .. ':k:' .. key))
    if tat and tat > NOW_US then
      out[#out + 1] = key
      out[#out + 1] = tat - NOW_US
    end
  end
  return out
end
return {redis.call('ZCOUNT', index, after, '+inf')}

-- ratelimit_refund: give back the units of a reservation whose caller did
-- not pass (its wait was cancelled or interrupted), if it is still the
-- latest on its key: the key's TAT is still the one it set. Else a later
-- caller reserved behind it, and its units stay used.
-- args[2] the TAT the reservation set, args[3] the µs it added (cost *
-- interval), args[4] the limited key.
-- Returns 1 if given back, else 0.
local k = BASE .. ':k:' .. args[4]
if redis.call('GET', k) ~= args[2] then
  return 0
end
local index = BASE .. ':index'
local tat = tonumber(args[2]) - tonumber(args[3])
if tat <= NOW_US then
  redis.call('DEL', k)
  redis.call('ZREM', index, args[4])
else
  local text = string.format('%d', tat)
  redis.call('SET', k, text, 'PX', math.ceil((tat - NOW_US) / 1000))
  redis.call('ZADD', index, text, args[4])
end
return 1

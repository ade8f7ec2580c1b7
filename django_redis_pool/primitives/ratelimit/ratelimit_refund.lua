-- ratelimit_refund: give back the units of a reservation whose caller did
-- not pass (its wait was cancelled or interrupted), if it is still the
-- latest on its key: the key's TAT is still the one it set. Else a later
-- caller reserved behind it, and its units stay used. BASE is the limited
-- key's own base (ratelimit_decide.lua).
-- args[2] the TAT the reservation set, args[3] the µs it added (cost *
-- interval).
-- Returns 1 if given back, else 0.
local k = BASE .. ':tat'
if redis.call('GET', k) ~= args[2] then
  return 0
end
local tat = tonumber(args[2]) - tonumber(args[3])
if tat <= NOW_US then
  redis.call('DEL', k)
else
  redis.call('SET', k, string.format('%d', tat), 'PX', math.ceil((tat - NOW_US) / 1000))
end
return 1

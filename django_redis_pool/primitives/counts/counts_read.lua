-- counts_read: the primitive's counts (see counts_add). args[2]: how many of
-- the last minutes to read too (the current one included).
-- Returns {the current unix minute, the totals as a flat field/value list,
-- then one such list per minute asked for, oldest first}.
local minute = math.floor(NOW / 60000)
local out = {minute, redis.call('HGETALL', BASE .. ':counts')}
for m = minute - tonumber(args[2]) + 1, minute do
  out[#out + 1] = redis.call('HGETALL', BASE .. ':minute:' .. m)
end
return out

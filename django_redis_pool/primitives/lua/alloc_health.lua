-- alloc_health: take a key out of rotation for args[3] ms, or (0) put it back
-- at once. A held key stays with its holder and goes out of rotation when
-- freed. args[2] key. Returns 1, or 0 if it is not a key.
local key, cooldown = args[2], tonumber(args[3])
if not set_cooldown(key, cooldown > 0 and NOW + cooldown or 0) then
  return 0
end
if cooldown > 0 then
  redis.call('ZREM', K_AVAIL, key)
elseif not redis.call('ZSCORE', K_LEASES, key) then
  make_available(key)
end
return 1

-- alloc_health: take a key out of rotation for args[3] ms, or (0) put it back
-- at once. A held key stays with its holder and goes out of rotation when
-- freed. args[2] key. Returns 1, or 0 if it is not a key.
local key, cooldown = args[2], tonumber(args[3])
if not set_cooldown(key, cooldown > 0 and NOW + cooldown or 0) then
  return 0
end
if cooldown > 0 then
  take_off(key)
elseif not redis.call('ZSCORE', K_LEASES, key) then
  keep_available(key)  -- a free key stays where it is
end
return 1

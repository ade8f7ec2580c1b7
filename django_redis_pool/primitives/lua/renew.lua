-- renew: extend a live lease (and confirm a provisional grant). args[2]
-- (packed): token ('' for whoever holds it) | lease ms (-1 no expiry, -2 keep
-- the lease's own duration) | resource.
-- Returns the new expiry in ms (-1 none), or -2 when the lease is lost.
local token, lease_ms, res = string.match(args[2], '^([^|]*)|([^|]*)|(.*)$')
lease_ms = tonumber(lease_ms)
local rec = decode(redis.call('HGET', K_INFO, res))
if not rec or (token ~= '' and rec.t ~= token) then
  return -2
end
if is_expired(rec) then
  end_lease(res, rec)
  return -2
end
if lease_ms == -2 then
  lease_ms = rec.l
end
set_lease(res, rec, lease_ms)
return rec.e

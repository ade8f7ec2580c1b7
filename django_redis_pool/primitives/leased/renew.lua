-- renew: extend a live lease (and confirm a provisional grant). args[2]
-- (packed by primitives/wire.py's renew):
-- token ('' for whoever holds it) | lease ms (-1 no expiry, -2 keep
-- the lease's own duration) | resource.
-- Returns the new expiry in ms (-1 none), or -2 when the lease is lost (an
-- expired one is reclaimed on the way).
local res, lease_ms, rec = renew_request(args[2])
if not rec then
  return -2
end
if is_expired(rec) then
  end_lease(res, rec)
  return -2
end
return extend(res, rec, lease_ms)

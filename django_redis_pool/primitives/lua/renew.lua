-- renew: extend a live lease. ARGV[2] resource, ARGV[3] token ('' for whoever
-- holds it), ARGV[4] lease ms (-1 no expiry, -2 keep the lease's own duration).
-- Returns {1, expires ms (-1 none)} or {0} when the lease is lost.
local RES, TOKEN, LEASE_MS = ARGV[2], ARGV[3], tonumber(ARGV[4])
local rec = lease_record(RES)
if not rec or (TOKEN ~= '' and rec.t ~= TOKEN) then
  return {0}
end
if is_expired(rec) then
  end_lease(RES, rec)
  return {0}
end
if LEASE_MS == -2 then
  LEASE_MS = rec.l
end
set_lease(rec, LEASE_MS)
return {1, rec.e}

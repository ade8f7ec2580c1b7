-- release: end a lease and hand the resource to the head waiter (or to avail).
-- ARGV[2] resource, ARGV[3] the lease's token, or '' to release whoever holds it.
-- Returns 1 if a live lease was ended, else 0 (an expired one is reclaimed).
local RES, TOKEN = ARGV[2], ARGV[3]
local rec, raw = lease_record(RES)
if not rec then
  -- 'x:<token>' marks the release of that lease: a retried call answers the same.
  if TOKEN ~= '' and raw == 'x:' .. TOKEN then
    return 1
  end
  return 0
end
if TOKEN ~= '' and rec.t ~= TOKEN then
  return 0
end
if is_expired(rec) then
  end_lease(RES, rec, false)
  return 0
end
end_lease(RES, rec, TOKEN ~= '')
return 1

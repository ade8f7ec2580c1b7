-- renew_fast: renew's common case, for the EVALSHA path (see acquire_fast).
-- It answers exactly as renew would, except for an expired lease, which
-- returns REPLY_SLOW having changed nothing: renew itself reclaims it.
-- args[2]: as renew's.
local res, lease_ms, rec = renew_request(args[2])
if not rec then
  return -2
end
if is_expired(rec) then
  return REPLY_SLOW
end
return extend(res, rec, lease_ms)

-- release: end a lease and hand the resource to the head waiter (or to avail).
-- args[2] (packed by primitives/wire.py's release):
-- the lease's token, or '' for whoever holds it | request id
-- (a retried request gets the first run's answer) | a fence, or '': only the
-- lease with that fence is ended | '1' for an operator's force-release, which
-- ends the hold entirely (no rlock count-down) | resource.
-- Returns 1 if a live lease was ended, 2 if an rlock's count went down but it is
-- still held, else 0 (an expired lease is reclaimed on the way).
local token, req, fence, force, res =
  string.match(args[2], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
local rec = decode(redis.call('HGET', K_INFO, res))
local mine = rec and (token == '' or rec.t == token) and (fence == '' or rec.f == tonumber(fence))
-- A lease found under its own token is this request's first run (a run that
-- ended it would have removed it). Anything else may be a retry: never end a
-- hold granted since the first run, answer as it did.
if not mine or token == '' then
  local done = remembered(req)
  if done then
    return tonumber(done)
  end
end
if not mine then
  return 0
end
if MODE == MODE_RLOCK and rec.q == req then
  return 2
end
if is_expired(rec) then
  end_lease(res, rec)
  return 0
end
if MODE == MODE_RLOCK and force ~= '1' and rec.n > 1 then
  rec.n, rec.q = rec.n - 1, req
  redis.call('HSET', K_INFO, res, encode(rec))
  return 2
end
end_lease(res, rec)
remember(req)
return 1

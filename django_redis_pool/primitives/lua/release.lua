-- release: end a lease and hand the resource to the head waiter (or to avail).
-- ARGV[2] resource, ARGV[3] the lease's token, or '' for whoever holds it,
-- ARGV[4] request id (a retried request gets the first run's answer: an ended
-- lease's is remembered briefly, an rlock's count-down is marked in its record),
-- ARGV[5] a fence, or '': only the lease with that fence is ended, ARGV[6] '1'
-- for an operator's force-release, which ends the hold entirely (no rlock
-- count-down).
-- Returns 1 if a live lease was ended, 2 if an rlock's count went down but it is
-- still held, else 0 (an expired lease is reclaimed on the way).
local RES, TOKEN, REQ, FENCE, FORCE = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] == '1'
local done = remembered(REQ)
if done then  -- a retried run: never end a hold granted since the first run
  return tonumber(done)
end
local rec = lease_record(RES)
if not rec or (TOKEN ~= '' and rec.t ~= TOKEN) or (FENCE ~= '' and rec.f ~= tonumber(FENCE)) then
  return 0
end
if rec.q == REQ then
  return 2
end
if is_expired(rec) then
  end_lease(RES, rec)
  return 0
end
if MODE == 'rlock' and not FORCE and (rec.n or 1) > 1 then
  rec.n, rec.q = rec.n - 1, REQ
  redis.call('HSET', K_INFO, RES, cjson.encode(rec))
  return 2
end
end_lease(RES, rec)
remember(REQ, 1)
return 1

-- release: end a lease and hand the resource to the head waiter (or to avail).
-- ARGV[2] resource, ARGV[3] the lease's token, or '' for whoever holds it,
-- ARGV[4] request id (a retried request gets the first run's answer).
-- Returns 1 if a live lease was ended, 2 if an rlock's count went down but it is
-- still held, else 0 (an expired lease is reclaimed on the way).
local RES, TOKEN, REQ = ARGV[2], ARGV[3], ARGV[4]
local done = remembered(REQ)
if done then
  return tonumber(done)
end
local rec = lease_record(RES)
if not rec or (TOKEN ~= '' and rec.t ~= TOKEN) then
  return 0
end
if is_expired(rec) then
  end_lease(RES, rec)
  return 0
end
local result = 1
if MODE == 'rlock' and (rec.n or 1) > 1 then
  rec.n = rec.n - 1
  redis.call('HSET', K_INFO, RES, cjson.encode(rec))
  result = 2
else
  end_lease(RES, rec)
end
remember(REQ, result)
return result

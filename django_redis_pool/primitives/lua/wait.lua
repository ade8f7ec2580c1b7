-- wait: a queued waiter checks in after its blocking read timed out. Reclaims
-- expired leases (a crashed holder's resource goes to the head waiter), then
-- returns the caller's grant if it has one, else renews its liveness window.
-- ARGV[2] token, ARGV[3] liveness window ms.
-- Returns {'granted', record} | {'queued', ms until next expiry} | {'gone'}.
local TOKEN, ALIVE_MS = ARGV[2], tonumber(ARGV[3])

reclaim(RECLAIM_LIMIT)
pump()
local state, value = token_state(TOKEN)
if state == 'granted' then
  redis.call('DEL', wake_key(TOKEN))
  return {'granted', value}
elseif not state then
  return {'gone'}
end
local raw = redis.call('HGET', K_WINFO, value)
if not raw then
  redis.call('HDEL', K_TOK, TOKEN)
  return {'gone'}
end
local w = cjson.decode(raw)
w.alive = NOW + ALIVE_MS + GRACE_MS
redis.call('HSET', K_WINFO, value, cjson.encode(w))
return {'queued', next_expiry_ms()}

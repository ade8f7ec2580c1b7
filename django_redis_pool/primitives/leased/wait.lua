-- wait: a queued waiter checks in after its blocking read timed out. Reclaims
-- expired leases (a crashed holder's resource goes to the head waiter), then
-- returns the caller's grant if it has one (a share of its identity's hold
-- included), else renews its liveness window.
-- args[2] (packed by primitives/wire.py's wait): token | liveness window ms.
-- Returns "resource\nrecord" (a grant) | ms until the next expiry (-1 none; 0
-- when a pool's resource is free but its serving gave up on a run of dead
-- waiters before this one: each check-in drops SKIP_LIMIT more) | REPLY_GONE.
local token, alive_ms = string.match(args[2], '^([^|]*)|(.*)$')
reclaim(RECLAIM_LIMIT)
local unreached = serve_waiters()
local state, value, raw = token_state(token)
if state == 'granted' then
  redis.call('DEL', BASE .. ':wake:' .. token)
  if raw then
    return value .. '\n' .. raw
  end
  return REPLY_GONE
elseif not state then
  local resource, _, raw_now = shared_with(token)  -- (our place given up for a share)
  if resource then
    return resource .. '\n' .. raw_now
  end
  return REPLY_GONE
end
local w = decode_waiter(redis.call('HGET', K_WINFO, value))
if not w then
  redis.call('HDEL', K_INFO, '\0' .. token)
  return REPLY_GONE
end
w.alive = NOW + tonumber(alive_ms) + GRACE_MS
redis.call('HSET', K_WINFO, value, encode_waiter(w))
index_waiter(value, w)
if unreached and not SLOTS then
  return 0  -- a resource is free, the serving gave up behind dead waiters: check in again
end
return next_expiry_ms()

-- withdraw: a waiter gives up (timeout, interrupt). If a resource was handed to
-- it in the meantime, the resource goes straight to the next waiter or back to
-- avail, so nothing is lost. A semaphore's waiter leaving may let the waiters
-- behind it be served (it needed more permits than were free): they are. A
-- reentrant lock's hold handed or shared to it (see shared_with) gives back
-- the one count that was its: the hold ends only if no other count is left.
-- args[2] token (primitives/wire.py's withdraw). Returns 1 if something was given back.
local token = args[2]
local state, value, raw = token_state(token)
local rec
if state == 'granted' and raw then
  rec = decode(raw)
  if rec.t ~= token then
    rec = nil
  end
elseif not state and MODE == MODE_RLOCK then
  value, rec = shared_with(token)  -- (our place given up for a share)
end
redis.call('DEL', BASE .. ':wake:' .. token)
if rec and MODE == MODE_RLOCK and rec.n > 1 then
  rec.n = rec.n - 1  -- (the hold goes on, under its own token)
  redis.call('HSET', K_INFO, value, encode(rec))
  return 1
end
redis.call('HDEL', K_INFO, '\0' .. token)
if rec then
  end_lease(value, rec)
  return 1
end
if state == 'queued' then
  drop_waiter(value, decode_waiter(redis.call('HGET', K_WINFO, value)))
  if MODE == MODE_SEM then
    serve_slots()
  end
end
return 0

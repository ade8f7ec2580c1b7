-- withdraw: a waiter gives up (timeout, interrupt). If a resource was handed to
-- it in the meantime, the resource goes straight to the next waiter or back to
-- avail, so nothing is lost. A semaphore's waiter leaving may let the waiters
-- behind it be served (it needed more permits than were free): they are.
-- args[2] token. Returns 1 if something was given back.
local token = args[2]
local state, value, raw = token_state(token)
redis.call('DEL', BASE .. ':wake:' .. token)
if state == 'queued' then
  drop_waiter(value, decode_waiter(redis.call('HGET', K_WINFO, value)))
  if MODE == MODE_SEM then
    serve_slots()
  end
elseif state == 'granted' and raw then
  local rec = decode(raw)
  if rec.t == token then
    end_lease(value, rec)
    return 1
  end
end
redis.call('HDEL', K_INFO, '\0' .. token)
return 0

-- withdraw: a waiter gives up (timeout, interrupt). If a resource was handed to
-- it in the meantime, the resource goes straight to the next waiter or back to
-- avail, so nothing is lost. ARGV[2] token. Returns 1 if something was given back.
local TOKEN = ARGV[2]
local state, value = token_state(TOKEN)
redis.call('DEL', wake_key(TOKEN))
if state == 'queued' then
  local raw = redis.call('HGET', K_WINFO, value)
  drop_waiter(value, raw and cjson.decode(raw))
  redis.call('HDEL', K_TOK, TOKEN)
  return 0
elseif state == 'granted' then
  local rec = cjson.decode(value)
  end_lease(rec.r, rec, false)
  return 1
end
return 0

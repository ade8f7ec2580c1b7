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
elseif state == 'granted' and value then
  local rec = cjson.decode(value)
  if rec.t == TOKEN then
    end_lease(rec.r, rec)
    return 1
  end
end
redis.call('HDEL', K_TOK, TOKEN)
return 0

-- Consistent reads of a primitive, on the Redis clock: a lease past its expiry
-- counts as ended even before it is reclaimed. ARGV[2] what, ARGV[3] resource.
local WHAT, RES = ARGV[2], ARGV[3]
local live = '(' .. NOW

-- HGET every member of `ids` from `hash`, in slices that fit Lua's stack.
local function hmget_all(hash, ids)
  local out = {}
  for i = 1, #ids, 1000 do
    local vals = redis.call('HMGET', hash, unpack(ids, i, math.min(i + 999, #ids)))
    for _, v in ipairs(vals) do
      table.insert(out, v)
    end
  end
  return out
end

if WHAT == 'counts' then
  -- {available (free slots), held by a live lease, waiting, size (slots; -1 unset)}
  local held = redis.call('ZCOUNT', K_LEASES, live, '+inf')
  local waiting = redis.call('ZCARD', K_WAITQ)
  if SLOTS then
    local size = 1
    if MODE == 'sem' then
      size = tonumber(redis.call('GET', K_MAX) or '-1')
    end
    return {math.max(0, size - held), held, waiting, size}
  end
  local available = redis.call('ZCARD', K_AVAIL) + redis.call('ZCOUNT', K_LEASES, '-inf', NOW)
  return {available, held, waiting, available + held}
elseif WHAT == 'state' then
  -- 1 available, 2 leased, 0 not in the pool
  if redis.call('ZSCORE', K_AVAIL, RES) then
    return 1
  end
  local score = redis.call('ZSCORE', K_LEASES, RES)
  if not score then
    return 0
  end
  if score ~= 'inf' and tonumber(score) <= NOW then
    return 1
  end
  return 2
elseif WHAT == 'record' then
  local rec = live_record(RES)
  return rec and cjson.encode(rec)
elseif WHAT == 'available' then
  local out = redis.call('ZRANGE', K_AVAIL, 0, -1)
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW)) do
    table.insert(out, r)
  end
  return out
elseif WHAT == 'leases' then
  return hmget_all(K_INFO, redis.call('ZRANGEBYSCORE', K_LEASES, live, '+inf'))
elseif WHAT == 'waiters' then
  return hmget_all(K_WINFO, redis.call('ZRANGE', K_WAITQ, 0, -1))
elseif WHAT == 'snapshot' then
  -- {now ms, size (slots: -1 unset; pools: available + held), available ids
  -- (pools), live lease records, waiter records in serving order}
  local leases = hmget_all(K_INFO, redis.call('ZRANGEBYSCORE', K_LEASES, live, '+inf'))
  local available, size = {}, 1
  if MODE == 'sem' then
    size = tonumber(redis.call('GET', K_MAX) or '-1')
  elseif not SLOTS then
    available = redis.call('ZRANGE', K_AVAIL, 0, -1)
    for _, r in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW)) do
      table.insert(available, r)
    end
    size = #available + #leases
  end
  local waiters = hmget_all(K_WINFO, redis.call('ZRANGE', K_WAITQ, 0, -1))
  return {NOW, size, available, leases, waiters}
elseif WHAT == 'expired' then
  -- What gc would reclaim now: {expired lease records, dead waiter records}.
  local expired = {}
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW)) do
    table.insert(expired, redis.call('HGET', K_INFO, r) or cjson.encode({r = r}))
  end
  local dead = {}
  for _, id in ipairs(redis.call('ZRANGE', K_WAITQ, 0, -1)) do
    local raw = redis.call('HGET', K_WINFO, id)
    if not raw or not waiter_alive(cjson.decode(raw)) then
      table.insert(dead, raw or cjson.encode({h = id, p = 0, s = 0, dl = -1}))
    end
  end
  return {expired, dead}
end
return redis.error_reply('unknown read ' .. tostring(WHAT))

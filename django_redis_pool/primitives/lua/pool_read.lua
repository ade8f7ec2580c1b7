-- Consistent reads of a pool, on the Redis clock: a lease past its expiry counts
-- as available even before it is reclaimed. ARGV[2] what, ARGV[3] resource.
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
  return {redis.call('ZCARD', K_AVAIL) + redis.call('ZCOUNT', K_LEASES, '-inf', NOW),
          redis.call('ZCOUNT', K_LEASES, live, '+inf'),
          redis.call('ZCARD', K_WAITQ)}
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
end
return redis.error_reply('unknown read ' .. tostring(WHAT))

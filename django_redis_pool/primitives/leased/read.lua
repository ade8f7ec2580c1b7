-- read: consistent reads of a primitive, on the Redis clock: a lease past its
-- expiry counts as ended even before it is reclaimed. args[2] what, args[3]
-- resource. Lease records come back as flat {resource, record, ...} lists.
local WHAT, RES = args[2], args[3]
local live = '(' .. NOW

-- HGET every member of `ids` from `hash`, in slices that fit Lua's stack;
-- returns the values, or with `paired` {id, value, ...}.
local function hmget_all(hash, ids, paired)
  local out = {}
  for i = 1, #ids, 1000 do
    local vals = redis.call('HMGET', hash, unpack(ids, i, math.min(i + 999, #ids)))
    for j, v in ipairs(vals) do
      if paired then
        out[#out + 1] = ids[i + j - 1]
      end
      out[#out + 1] = v or ''
    end
  end
  return out
end

-- Allocators: `count` free keys (-1: all) from rank `offset` of the order
-- they are handed out in: by priority (highest first), each priority by turn.
-- Visits one priority at a time, so it reads no more than it returns, besides
-- one count per priority skipped.
local function free_keys_page(offset, count)
  local out, above = {}, '-inf'
  while count < 0 or #out < count do
    local top = redis.call('ZRANGEBYSCORE', K_AVAIL, above, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if not top[1] then
      break
    end
    above = '(' .. top[2]
    local order = order_key(priority_of(top[2]))
    local size = redis.call('ZCARD', order)
    if offset >= size then
      offset = offset - size
    else
      local stop = count < 0 and -1 or offset + count - #out - 1
      for _, key in ipairs(redis.call('ZRANGE', order, offset, stop)) do
        out[#out + 1] = key
      end
      offset = 0
    end
  end
  return out
end

-- Semaphores: the permits the live leases hold, of which `held` are live
-- (`expired` more are past their expiry, not reclaimed yet): one each, plus
-- "\1extra" less what the expired ones take beyond one (their records read;
-- at most as many as the max size). Anything else: `held`.
local function held_permits(held, expired)
  if MODE ~= MODE_SEM then
    return held
  end
  local extra = tonumber(redis.call('HGET', K_INFO, F_EXTRA)) or 0
  if extra > 0 and expired > 0 then
    local ended = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW)
    for _, raw in ipairs(hmget_all(K_INFO, ended)) do
      local k = tonumber(string.match(raw, '^' .. string.rep('[^|]*|', 8) .. '([^|]*)|'))
      if k and k > 1 then
        extra = extra - (k - 1)
      end
    end
  end
  return held + math.max(0, extra)
end

if WHAT == 'counts' then
  -- {available (free slots: a semaphore's free permits), held by a live lease,
  -- waiting, size (slots; -1 unset), permits of the live leases}
  local held = redis.call('ZCOUNT', K_LEASES, live, '+inf')
  local waiting = redis.call('ZCARD', K_WAITQ)
  if SLOTS then
    local size = 1
    if MODE == MODE_SEM then
      size = tonumber(redis.call('GET', K_MAX) or '-1')
    end
    local permits = held_permits(held, redis.call('ZCOUNT', K_LEASES, '-inf', NOW))
    return {math.max(0, size - permits), held, waiting, size, permits}
  end
  local available = redis.call('ZCARD', K_AVAIL) + redis.call('ZCOUNT', K_LEASES, '-inf', NOW)
  -- an allocator's size also counts its keys out of rotation
  return {available, held, waiting, ALLOC and redis.call('HLEN', BASE .. ':keys') or available + held,
    held}
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
  local _, raw = live_record(RES)
  return raw
elseif WHAT == 'available' then
  local out = redis.call('ZRANGE', K_AVAIL, 0, -1)
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW)) do
    table.insert(out, r)
  end
  return out
elseif WHAT == 'leases' then
  return hmget_all(K_INFO, redis.call('ZRANGEBYSCORE', K_LEASES, live, '+inf'), true)
elseif WHAT == 'waiters' then
  return hmget_all(K_WINFO, redis.call('ZRANGE', K_WAITQ, 0, -1))
elseif WHAT == 'snapshot' then
  -- One page of everything: args[3] page size (-1: all), args[4..6] offsets
  -- into the available ids (pools), the live leases (soonest expiry first) and
  -- the waiters (serving order). Returns {now ms, size (slots: -1 unset; pools:
  -- available + held), available total, available ids, held total, lease
  -- records, waiting total, waiter records, expired leases awaiting gc, when
  -- the oldest live hold began (ms; -1 none or a page) among the first
  -- OLDEST_CHECKED, the permits of the live holds (held_permits)}.
  -- A page size of 0 reads only the counts.
  -- Bounded by the page size: ZRANGE by rank and ZRANGEBYSCORE ... LIMIT.
  local limit = tonumber(args[3])
  local a_off, h_off, w_off = tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  -- ZRANGE (ZREVRANGE if `reverse`) of one page of `key` from rank `offset`
  -- (limit 0: none)
  local function page(key, offset, reverse)
    if limit == 0 then
      return {}
    end
    return redis.call(reverse and 'ZREVRANGE' or 'ZRANGE', key, offset,
      limit < 0 and -1 or offset + limit - 1)
  end
  local held = redis.call('ZCOUNT', K_LEASES, live, '+inf')
  local expired = redis.call('ZCOUNT', K_LEASES, '-inf', NOW)
  local waiting = redis.call('ZCARD', K_WAITQ)
  local lease_ids = redis.call('ZRANGEBYSCORE', K_LEASES, live, '+inf', 'LIMIT', h_off, limit)
  local available, avail_total, size = {}, 0, 1
  if MODE == MODE_SEM then
    size = tonumber(redis.call('GET', K_MAX) or '-1')
  elseif not SLOTS then
    -- the available set first, then expired leases (available once reclaimed)
    local in_set = redis.call('ZCARD', K_AVAIL)
    avail_total = in_set + expired
    if ALLOC and limit ~= 0 then
      available = free_keys_page(a_off, limit)
    else
      available = page(K_AVAIL, a_off, MODE == MODE_LIFO)  -- in hand-out order
    end
    local wanted = limit < 0 and expired or limit - #available
    if wanted > 0 then
      local skip = math.max(0, a_off - in_set)
      for _, r in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW, 'LIMIT', skip, wanted)) do
        table.insert(available, r)
      end
    end
    size = ALLOC and redis.call('HLEN', BASE .. ':keys') or avail_total + held
  end
  local waiters = hmget_all(K_WINFO, page(K_WAITQ, w_off))
  -- (a hold stuck for hours while its process renews it shows here; not on
  -- a page, which reads no more than it shows)
  local oldest = -1
  if limit <= 0 then
    local first = redis.call('ZRANGEBYSCORE', K_LEASES, live, '+inf', 'LIMIT', 0, OLDEST_CHECKED)
    for _, raw in ipairs(hmget_all(K_INFO, first)) do
      local began = tonumber(string.match(raw, '^[^|]*|[^|]*|([^|]*)|'))
      if began and began > 0 and (oldest < 0 or began < oldest) then
        oldest = began
      end
    end
  end
  return {NOW, size, avail_total, available, held, hmget_all(K_INFO, lease_ids, true), waiting, waiters,
    expired, oldest, held_permits(held, expired)}
elseif WHAT == 'expired' then
  -- What gc would reclaim now: {expired lease records, dead waiter records}.
  local expired = hmget_all(K_INFO, redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW), true)
  local dead = {}
  for _, id in ipairs(redis.call('ZRANGE', K_WAITQ, 0, -1)) do
    local raw = redis.call('HGET', K_WINFO, id)
    local w = decode_waiter(raw)
    if not w or not waiter_alive(w) then
      dead[#dead + 1] = raw or encode_waiter({t = '', l = -1, p = 0, s = 0, dl = -1, alive = 0,
        re = 0, k = 1, h = id})
    end
  end
  return {expired, dead}
end
return redis.error_reply('unknown read ' .. tostring(WHAT))

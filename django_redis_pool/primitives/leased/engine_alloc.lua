-- The lease engine's helpers of allocators: keys in and out of rotation by
-- priority, cooldowns, lifetimes, soft bindings and malloc (see engine.lua
-- for the keys, engine_lease.lua for the leases they grant).

-- @fn keep_available
-- Allocators: `key`, not leased, is to be free. A key already free keeps its
-- turn (re-adding a key, or reporting a healthy key healthy, never moves it),
-- moving to `priority` if that is given and differs; any other key becomes
-- free now (make_available, which reads its meta).
local function keep_available(key, priority)
  local score = redis.call('ZSCORE', K_AVAIL, key)
  if not score then
    make_available(key)
  elseif priority and priority_of(score) ~= tonumber(priority) then
    local from = order_key(priority_of(score))
    local turn = redis.call('ZSCORE', from, key) or next_seq()
    redis.call('ZREM', from, key)
    redis.call('ZADD', K_AVAIL, -tonumber(priority), key)
    redis.call('ZADD', order_key(priority), turn, key)
  end
end

-- @fn take_off
-- Allocators: `key` is no longer free (a no-op if it was not).
local function take_off(key)
  local score = redis.call('ZSCORE', K_AVAIL, key)
  if score then
    redis.call('ZREM', K_AVAIL, key)
    redis.call('ZREM', order_key(priority_of(score)), key)
  end
end

-- @fn set_held_priority
-- Allocators: the priority kept in `key`'s lease record, if it is leased, is
-- replaced by `priority` ('': unknown, its free reads the key's meta).
local function set_held_priority(key, priority)
  local rec = decode(redis.call('HGET', K_INFO, key))
  if rec and rec.q ~= priority then
    rec.q = priority
    redis.call('HSET', K_INFO, key, encode(rec))
  end
end

-- @fn set_cooldown
-- Allocators: record the end of `key`'s cooldown (0: none) in its meta and in
-- :sick. False if it is not a key.
local function set_cooldown(key, until_ms)
  local meta = redis.call('HGET', BASE .. ':keys', key)
  if not meta then
    return false
  end
  local head = string.match(meta, '^([^|]*|[^|]*)|')
  redis.call('HSET', BASE .. ':keys', key, head .. '|' .. until_ms)
  if until_ms > 0 then
    redis.call('ZADD', BASE .. ':sick', until_ms, key)
    redis.call('HDEL', K_INFO, F_DUE)
    set_held_priority(key, '')  -- its free must see the cooldown
  else
    redis.call('ZREM', BASE .. ':sick', key)
  end
  return true
end

-- @fn drop_key
-- Allocators: remove `key` altogether (a lease on it ends; its holder's renew
-- or free finds it gone). Returns 1 if it was a key.
local function drop_key(key)
  local rec = decode(redis.call('HGET', K_INFO, key))
  take_off(key)
  redis.call('ZREM', BASE .. ':kexp', key)
  redis.call('ZREM', BASE .. ':sick', key)
  if redis.call('ZREM', K_LEASES, key) == 1 and rec then
    redis.call('HDEL', K_INFO, key, '\0' .. rec.t)
  end
  return redis.call('HDEL', BASE .. ':keys', key)
end

-- @fn pick_key
-- Allocators: the key a malloc gets (nil if none is free): the one bound to
-- `name` if that key is free, else the head of the highest priority's order
-- (taken off the free keys in "alloc" mode). Returns the key, its priority
-- and whether it was taken off.
local function pick_key(name)
  if name ~= '' then
    local bound = redis.call('HGET', BASE .. ':bind', name)
    if bound and tonumber(redis.call('ZSCORE', BASE .. ':bindexp', name) or 0) > NOW then
      local score = redis.call('ZSCORE', K_AVAIL, bound)
      if score then
        return bound, priority_of(score), false
      end
    end
  end
  local top = redis.call('ZRANGE', K_AVAIL, 0, 0, 'WITHSCORES')
  if not top[1] then
    return nil
  end
  local priority = priority_of(top[2])
  local order = order_key(priority)
  if MODE == MODE_SHARED then
    return redis.call('ZRANGE', order, 0, 0)[1] or top[1], priority, false
  end
  local key = redis.call('ZPOPMIN', order)[1] or top[1]
  redis.call('ZREM', K_AVAIL, key)
  return key, priority, true
end

-- @fn hand_out
-- Allocators: give `key` (from pick_key) to the caller and bind `name` to it
-- for `bind_ms`. "alloc": a lease for `token`/`holder`; "shared": the key goes
-- to the back of its priority. Returns {key, lease record} ("shared": {key,
-- fence}).
local function hand_out(key, priority, popped, name, bind_ms, token, holder, lease_ms)
  if name ~= '' then
    redis.call('HSET', BASE .. ':bind', name, key)
    redis.call('ZADD', BASE .. ':bindexp', NOW + bind_ms, name)
    -- (and up to 2 expired bindings dropped: each new one at most replaces
    -- them, so bindings of names never seen again do not pile up without gc)
    local stale = redis.call('ZRANGEBYSCORE', BASE .. ':bindexp', '-inf', NOW, 'LIMIT', 0, 2)
    for _, old in ipairs(stale) do
      redis.call('ZREM', BASE .. ':bindexp', old)
      redis.call('HDEL', BASE .. ':bind', old)
    end
  end
  if MODE == MODE_SHARED then
    -- (its new turn is the fence; %d: a number's own text has 14 digits)
    return key .. '\n' .. string.format('%d', make_available(key, priority))
  end
  if not popped then
    redis.call('ZREM', K_AVAIL, key)
    redis.call('ZREM', order_key(priority), key)
  end
  return key .. '\n' .. grant(key, token, holder, lease_ms, false, priority)
end

-- @fn malloc_args
-- alloc_malloc's arguments, all packed in args[2] (see alloc_malloc.lua):
-- token, lease ms, binding ms, heal, name, holder.
local function malloc_args(args)
  return string.match(args[2], '^([^|]*)|([^|]*)|([^|]*)|([^\n]*)\n([^\n]*)\n(.*)$')
end

-- @fn malloc_fast
-- Allocators: alloc_malloc's common case, a new request while no timer is due
-- ("\1due", read in the same call as the token), so no lease is reclaimed and
-- no key checked. It answers exactly as alloc_malloc would; anything else (a
-- retry, a due or unknown timer) returns REPLY_SLOW having changed nothing.
-- args: as alloc_malloc's.
local function malloc_fast(args)
  local token, lease_ms, bind_ms, heal, name, holder = malloc_args(args)
  local got = redis.call('HMGET', K_INFO, '\0' .. token, F_DUE)
  DUE = got[2] == 'inf' and math.huge or tonumber(got[2])
  if got[1] or not DUE or DUE <= NOW then
    DUE = nil
    return REPLY_SLOW
  end
  local key, priority, popped = pick_key(name)
  if not key then
    if heal == '1' and redis.call('EXISTS', BASE .. ':keys') == 0 then
      return REPLY_SLOW  -- no key at all: alloc_malloc tells its caller to restore them
    end
    return REPLY_NONE
  end
  return hand_out(key, priority, popped, name, tonumber(bind_ms), token, holder, tonumber(lease_ms))
end

-- @fn refresh_due
-- Allocators: store "\1due" from the heads of the timer indexes.
local function refresh_due()
  local due_at = math.huge
  for _, zset in ipairs({K_LEASES, BASE .. ':kexp', BASE .. ':sick'}) do
    local head = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')[2]
    if head and head ~= 'inf' then
      due_at = math.min(due_at, tonumber(head))
    end
  end
  redis.call('HSET', K_INFO, F_DUE, due_at == math.huge and 'inf' or due_at)
end

-- @fn expire_and_heal_keys
-- Allocators: drop up to `limit` keys whose lifetime ended, and bring back up
-- to `limit` whose cooldown ended. Returns how many of each, and whether any
-- key has a lifetime at all.
local function expire_and_heal_keys(limit)
  local expired, lifetimes = due(BASE .. ':kexp', limit)
  for _, key in ipairs(expired) do
    drop_key(key)
  end
  local healed = due(BASE .. ':sick', limit)
  for _, key in ipairs(healed) do
    set_cooldown(key, 0)
    if not redis.call('ZSCORE', K_LEASES, key) then
      make_available(key)
    end
  end
  return #expired, #healed, lifetimes
end

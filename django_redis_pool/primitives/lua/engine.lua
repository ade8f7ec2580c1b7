-- Lease engine prelude, prepended to every lease-engine script.
--
-- KEYS[1] is the primitive's base key, ending in its hash tag (e.g.
-- "drp:{pool:printers}"); every key below is the base plus a suffix, so all of
-- them live in the base's Redis Cluster slot and one script may touch them all:
--   :avail   ZSET  resource -> sequence number (order of becoming available)
--   :leases  ZSET  resource -> expiry in ms on the Redis clock ("inf" = none)
--   :info    HASH  resource -> lease record (JSON), or "x:<token>" once released
--   :tok     HASH  request token -> "r:<resource>" (granted) | "w:<waiter id>" (queued)
--   :seq     STRING counter: fences, availability order and waiter arrival
--   :waitq   ZSET  waiter id -> -priority (ties: the zero-padded id = arrival order)
--   :winfo   HASH  waiter id -> waiter record (JSON)
--   :wake:<token>  LIST  a waiter's own wake list (the lease handed to it)
-- ARGV[1] is the pool's order (fifo | lifo | random); a script's own arguments
-- start at ARGV[2].
--
-- Lease record: r resource, t token, h holder, f fence, a acquired (ms),
-- e expires (ms, -1 = never), l lease duration (ms, -1 = none), p provisional (0/1).
-- Waiter record: t token, h holder, l lease duration, p priority, s since (ms),
-- dl own deadline (ms, -1 = none), alive (ms: the waiter is presumed dead after it).

local BASE, ORDER = KEYS[1], ARGV[1]
local K_AVAIL, K_LEASES, K_INFO = BASE .. ':avail', BASE .. ':leases', BASE .. ':info'
local K_TOK, K_SEQ = BASE .. ':tok', BASE .. ':seq'
local K_WAITQ, K_WINFO = BASE .. ':waitq', BASE .. ':winfo'
local WAKE_PREFIX = BASE .. ':wake:'

local RECLAIM_LIMIT = 16     -- expired leases reclaimed per call (bounded work)
local SKIP_LIMIT = 16        -- dead waiters dropped per hand-off
local PUMP_LIMIT = 64        -- resources handed to waiters per call
local GRACE_MS = 1000        -- slack on a waiter's liveness window
local PROVISIONAL_MS = 10000 -- life of an unconfirmed no-expiry grant to a waiter
local WAKE_TTL_MS = 60000    -- an unread wake list disappears after this

local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function wake_key(token)
  return WAKE_PREFIX .. token
end

local function lease_record(resource)
  local raw = redis.call('HGET', K_INFO, resource)
  if not raw or string.sub(raw, 1, 2) == 'x:' then
    return nil, raw
  end
  return cjson.decode(raw), raw
end

local function is_expired(rec)
  return rec.e ~= -1 and rec.e <= NOW
end

-- Record a new lease of `resource` for `token`; returns the record as JSON.
-- A no-expiry grant made on a waiter's behalf is provisional: it expires after
-- PROVISIONAL_MS unless the waiter confirms it (renew), so a waiter that died
-- before reading its wake list never keeps the resource.
local function grant(resource, token, holder, lease_ms, provisional)
  local fence = redis.call('INCR', K_SEQ)
  local expires, score = -1, 'inf'
  local p = 0
  if lease_ms >= 0 then
    expires = NOW + lease_ms
    score = expires
  elseif provisional then
    expires = NOW + PROVISIONAL_MS
    score = expires
    p = 1
  end
  local rec = cjson.encode({r = resource, t = token, h = holder, f = fence, a = NOW,
                            e = expires, l = lease_ms, p = p})
  redis.call('ZADD', K_LEASES, score, resource)
  redis.call('HSET', K_INFO, resource, rec)
  redis.call('HSET', K_TOK, token, 'r:' .. resource)
  return rec
end

local function waiter_alive(w)
  return w.alive >= NOW and (w.dl == -1 or w.dl > NOW)
end

local function drop_waiter(id, w)
  redis.call('ZREM', K_WAITQ, id)
  redis.call('HDEL', K_WINFO, id)
  if w then
    redis.call('HDEL', K_TOK, w.t)
    redis.call('DEL', wake_key(w.t))
  end
end

-- Hand `resource` to the head live waiter (priority desc, then arrival) and push
-- the lease to that waiter's own wake list. Dead or timed-out waiters met on the
-- way are dropped (at most SKIP_LIMIT). Returns true if a waiter got it.
local function hand_to_waiter(resource)
  for _ = 1, SKIP_LIMIT do
    local head = redis.call('ZRANGE', K_WAITQ, 0, 0)[1]
    if not head then
      return false
    end
    local raw = redis.call('HGET', K_WINFO, head)
    local w = raw and cjson.decode(raw)
    if w and waiter_alive(w) then
      redis.call('ZREM', K_WAITQ, head)
      redis.call('HDEL', K_WINFO, head)
      local rec = grant(resource, w.t, w.h, w.l, true)
      local wk = wake_key(w.t)
      redis.call('RPUSH', wk, rec)
      redis.call('PEXPIRE', wk, WAKE_TTL_MS)
      return true
    end
    drop_waiter(head, w)
  end
  return false
end

-- Make `resource` available: straight to the head waiter, else into avail.
local function put_back(resource)
  if not hand_to_waiter(resource) then
    redis.call('ZADD', K_AVAIL, redis.call('INCR', K_SEQ), resource)
  end
end

-- Remove the lease on `resource` (record `rec`) and make the resource available.
local function end_lease(resource, rec, tombstone)
  redis.call('ZREM', K_LEASES, resource)
  redis.call('HDEL', K_TOK, rec.t)
  if tombstone then
    redis.call('HSET', K_INFO, resource, 'x:' .. rec.t)
  else
    redis.call('HDEL', K_INFO, resource)
  end
  put_back(resource)
end

-- Reclaim up to `limit` expired leases; returns how many.
local function reclaim(limit)
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW, 'LIMIT', 0, limit)
  for _, resource in ipairs(expired) do
    local rec = lease_record(resource)
    if rec then
      end_lease(resource, rec, false)
    else
      redis.call('ZREM', K_LEASES, resource)
      put_back(resource)
    end
  end
  return #expired
end

local function take_available()
  if ORDER == 'lifo' then
    return redis.call('ZPOPMAX', K_AVAIL)[1]
  elseif ORDER == 'random' then
    local r = redis.call('ZRANDMEMBER', K_AVAIL)
    if r then
      redis.call('ZREM', K_AVAIL, r)
    end
    return r
  end
  return redis.call('ZPOPMIN', K_AVAIL)[1]
end

-- Serve queued waiters from avail (after a reclaim or a lost wake-up).
local function pump()
  for _ = 1, PUMP_LIMIT do
    if redis.call('ZCARD', K_WAITQ) == 0 then
      return
    end
    local r = take_available()
    if not r then
      return
    end
    if not hand_to_waiter(r) then
      redis.call('ZADD', K_AVAIL, redis.call('INCR', K_SEQ), r)
      return
    end
  end
end

-- Milliseconds until the earliest lease expires (-1 if none does): a waiter
-- wakes up then to reclaim it, so a crashed holder's resource reaches waiters
-- without any polling.
local function next_expiry_ms()
  local first = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
  if not first[2] or first[2] == 'inf' then
    return -1
  end
  return math.max(0, tonumber(first[2]) - NOW)
end

-- What a request token currently has: ('granted', record JSON), ('queued', id) or nil.
local function token_state(token)
  local s = redis.call('HGET', K_TOK, token)
  if not s then
    return nil
  end
  if string.sub(s, 1, 2) == 'r:' then
    local _, raw = lease_record(string.sub(s, 3))
    return 'granted', raw
  end
  return 'queued', string.sub(s, 3)
end

-- Lease engine prelude, prepended to every lease-engine script.
--
-- KEYS[1] is the primitive's base key, ending in its hash tag (e.g.
-- "drp:{pool:printers}"); every key below is the base plus a suffix, so all of
-- them live in the base's Redis Cluster slot and one script may touch them all:
--   :avail   ZSET  resource -> sequence number (order of becoming available; pools)
--   :max     STRING the number of slots (semaphores)
--   :leases  ZSET  resource -> expiry in ms on the Redis clock ("inf" = none)
--   :info    HASH  resource -> lease record (JSON)
--   :tok     HASH  request token -> "r:<resource>" (granted) | "w:<waiter id>" (queued)
--   :seq     STRING counter: fences, availability order and waiter arrival
--   :waitq   ZSET  waiter id -> -priority (ties: the zero-padded id = arrival order)
--   :winfo   HASH  waiter id -> waiter record (JSON)
--   :wake:<token>  LIST  a waiter's own wake list (the lease handed to it)
--   :wid:<identity> ZSET the queued sharing waiters (re = 1) of one identity, so
--                  that when the identity is granted, they share the hold at once
--   :done:<id>     STRING the reply of a finished request, kept briefly so that a
--                  request re-run by redis-py's retry gets the same answer
-- ARGV[1] is the mode; a script's own arguments start at ARGV[2]. Modes:
--   fifo | lifo | random  a pool of named resources, handed out in that order;
--   sem                   slots: the lease's resource is the holder's identity and
--                         at most GET :max identities hold at once;
--   lock | rlock          one slot, the resource is the holder; rlock counts
--                         repeated acquires of the same holder (reentrancy).
--
-- Lease record: r resource, t token, h holder, f fence, a acquired (ms),
-- e expires (ms, -1 = never), l lease duration (ms, -1 = none), p provisional (0/1),
-- n acquire count (rlock).
-- Waiter record: t token, h holder, l lease duration, p priority, s since (ms),
-- dl own deadline (ms, -1 = none), alive (ms: the waiter is presumed dead after it),
-- re 1 if it shares the hold of its identity (slot modes).

local BASE, MODE = KEYS[1], ARGV[1]
local SLOTS = MODE == 'sem' or MODE == 'lock' or MODE == 'rlock'
-- Modes in which a caller shares the hold of its identity (a reentrant lock's
-- holder acquiring again, a semaphore identity asking twice). A waiter records
-- its caller's choice (re = 1), since objects of one name may differ in it.
local SHARING = MODE == 'sem' or MODE == 'rlock'
local K_AVAIL, K_LEASES, K_INFO = BASE .. ':avail', BASE .. ':leases', BASE .. ':info'
local K_MAX = BASE .. ':max'
local K_TOK, K_SEQ = BASE .. ':tok', BASE .. ':seq'
local K_WAITQ, K_WINFO = BASE .. ':waitq', BASE .. ':winfo'
local WAKE_PREFIX = BASE .. ':wake:'

local RECLAIM_LIMIT = 16     -- expired leases reclaimed per call (bounded work)
local SKIP_LIMIT = 16        -- dead waiters dropped per hand-off
local PUMP_LIMIT = 64        -- resources handed to waiters per call
local GRACE_MS = 1000        -- slack on a waiter's liveness window
local PROVISIONAL_MS = 10000 -- life of an unconfirmed no-expiry grant to a waiter
local WAKE_TTL_MS = 60000    -- an unread wake list disappears after this
local DONE_TTL_MS = 60000    -- a finished request's reply is remembered this long

local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function wake_key(token)
  return WAKE_PREFIX .. token
end

local function lease_record(resource)
  local raw = redis.call('HGET', K_INFO, resource)
  if not raw then
    return nil
  end
  return cjson.decode(raw), raw
end

local function is_expired(rec)
  return rec.e ~= -1 and rec.e <= NOW
end

-- The live lease record of `resource`, or nil.
local function live_record(resource)
  local rec = lease_record(resource)
  if rec and not is_expired(rec) then
    return rec
  end
  return nil
end

-- A finished request's reply, remembered for a retry of the same request.
local function remember(id, reply)
  redis.call('SET', BASE .. ':done:' .. id, reply, 'PX', DONE_TTL_MS)
end

local function remembered(id)
  return redis.call('GET', BASE .. ':done:' .. id)
end

-- Store `rec` with a lease of `lease_ms` from now (-1: none); returns its JSON.
-- A no-expiry lease that is `provisional` (made on a waiter's behalf, not yet
-- confirmed) expires after PROVISIONAL_MS unless the waiter confirms it (renew),
-- so a waiter that died before reading its wake list never keeps the resource.
local function set_lease(rec, lease_ms, provisional)
  local score = 'inf'
  rec.e, rec.l, rec.p = -1, lease_ms, 0
  if lease_ms >= 0 then
    rec.e = NOW + lease_ms
    score = rec.e
  elseif provisional then
    rec.e, rec.p = NOW + PROVISIONAL_MS, 1
    score = rec.e
  end
  local raw = cjson.encode(rec)
  redis.call('ZADD', K_LEASES, score, rec.r)
  redis.call('HSET', K_INFO, rec.r, raw)
  return raw
end

-- Slot modes: an identity that already holds a slot asks again. Its lease is
-- refreshed (rlock: its acquire count goes up; the count n matters to rlock
-- releases only) and its record returned. An unconfirmed grant stays unconfirmed.
local function refresh(rec, lease_ms)
  rec.n = (rec.n or 1) + 1
  return set_lease(rec, lease_ms, rec.p == 1)
end

-- Record a new lease of `resource` for `token`; returns the record as JSON.
local function grant(resource, token, holder, lease_ms, provisional)
  local rec = {r = resource, t = token, h = holder, f = redis.call('INCR', K_SEQ), a = NOW}
  redis.call('HSET', K_TOK, token, 'r:' .. resource)
  return set_lease(rec, lease_ms, provisional)
end

local function waiter_alive(w)
  return w.alive >= NOW and (w.dl == -1 or w.dl > NOW)
end

local function wid_key(identity)
  return BASE .. ':wid:' .. identity
end

-- Take waiter `id` (record `w`, if known) off the queue.
local function unqueue(id, w)
  redis.call('ZREM', K_WAITQ, id)
  redis.call('HDEL', K_WINFO, id)
  if w and w.re == 1 then
    redis.call('ZREM', wid_key(w.h), id)
  end
end

local function drop_waiter(id, w)
  unqueue(id, w)
  if w then
    redis.call('HDEL', K_TOK, w.t)
    redis.call('DEL', wake_key(w.t))
  end
end

-- Take the head live waiter (priority desc, then arrival) off the queue; dead or
-- timed-out waiters met on the way are dropped (at most SKIP_LIMIT). nil if none.
local function next_waiter()
  for _ = 1, SKIP_LIMIT do
    local head = redis.call('ZRANGE', K_WAITQ, 0, 0)[1]
    if not head then
      return nil
    end
    local raw = redis.call('HGET', K_WINFO, head)
    local w = raw and cjson.decode(raw)
    if w and waiter_alive(w) then
      unqueue(head, w)
      return w
    end
    drop_waiter(head, w)
  end
  return nil
end

-- Push a lease record onto waiter `w`'s own wake list (it BLPOPs it).
local function wake(w, rec)
  local wk = wake_key(w.t)
  redis.call('RPUSH', wk, rec)
  redis.call('PEXPIRE', wk, WAKE_TTL_MS)
end

-- Pools: hand `resource` to the head live waiter. True if a waiter got it.
local function hand_to_waiter(resource)
  local w = next_waiter()
  if not w then
    return false
  end
  wake(w, grant(resource, w.t, w.h, w.l, true))
  return true
end

-- Slot modes: how many more identities may hold a slot now (the max may have
-- been lowered below the number of holders: never negative).
local function free_slots()
  local size = 1
  if MODE == 'sem' then
    size = tonumber(redis.call('GET', K_MAX) or '0')
  end
  return math.max(0, size - redis.call('ZCARD', K_LEASES))
end

-- Slot modes: `identity` holds a slot; its queued waiters (other callers with
-- the same identity) share that hold at once, taking no second slot.
local function share_hold(identity)
  for _, id in ipairs(redis.call('ZRANGE', wid_key(identity), 0, -1)) do
    local raw = redis.call('HGET', K_WINFO, id)
    local w = raw and cjson.decode(raw)
    if w and waiter_alive(w) then
      unqueue(id, w)
      redis.call('HDEL', K_TOK, w.t)
      wake(w, refresh(lease_record(identity), w.l))
    else
      drop_waiter(id, w)
      redis.call('ZREM', wid_key(identity), id)
    end
  end
end

-- Slot modes: grant a slot to `identity` (and share it with its waiters).
local function grant_slot(identity, token, lease_ms, provisional)
  local rec = grant(identity, token, identity, lease_ms, provisional)
  share_hold(identity)
  return rec
end

-- Slot modes: give free slots to queued waiters, in queue order.
local function serve_slots()
  for _ = 1, PUMP_LIMIT do
    if redis.call('ZCARD', K_WAITQ) == 0 or free_slots() == 0 then
      return
    end
    local w = next_waiter()
    if not w then
      return
    end
    -- (A waiter whose identity got a slot meanwhile was served by share_hold.)
    wake(w, grant_slot(w.h, w.t, w.l, true))
  end
end

-- Make `resource` available: straight to the head waiter, else into avail
-- (slot modes: its slot goes to the queue).
local function put_back(resource)
  if SLOTS then
    serve_slots()
  elseif not hand_to_waiter(resource) then
    redis.call('ZADD', K_AVAIL, redis.call('INCR', K_SEQ), resource)
  end
end

-- Remove the lease on `resource` (record `rec`) and make the resource available.
local function end_lease(resource, rec)
  redis.call('ZREM', K_LEASES, resource)
  redis.call('HDEL', K_TOK, rec.t)
  redis.call('HDEL', K_INFO, resource)
  put_back(resource)
end

-- Reclaim up to `limit` expired leases; returns their records (JSON; a lease
-- whose record is missing is returned as {"r": resource}).
local function reclaim(limit)
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW, 'LIMIT', 0, limit)
  local ended = {}
  for i, resource in ipairs(expired) do
    local rec, raw = lease_record(resource)
    if rec then
      end_lease(resource, rec)
    else
      redis.call('ZREM', K_LEASES, resource)
      put_back(resource)
    end
    ended[i] = raw or cjson.encode({r = resource})
  end
  return ended
end

local function take_available()
  if MODE == 'lifo' then
    return redis.call('ZPOPMAX', K_AVAIL)[1]
  elseif MODE == 'random' then
    local r = redis.call('ZRANDMEMBER', K_AVAIL)
    if r then
      redis.call('ZREM', K_AVAIL, r)
    end
    return r
  end
  return redis.call('ZPOPMIN', K_AVAIL)[1]
end

-- Serve queued waiters from avail or free slots (after a reclaim or a lost wake-up).
local function pump()
  if SLOTS then
    return serve_slots()
  end
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

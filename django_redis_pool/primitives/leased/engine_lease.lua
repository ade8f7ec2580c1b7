-- The lease engine's helpers of leases and waiters: queueing and serving
-- waiters, the slots of semaphores and locks, ending, reclaiming and handing
-- over a lease, and the requests of acquire and renew. The shared helpers and
-- the constants are engine.lua's; scripts.py joins the files in the order
-- engine, engine_lease, engine_alloc, engine_queue (a helper is defined
-- before any helper of a later file that calls it).

-- @fn waiter_alive
local function waiter_alive(w)
  return w.alive >= NOW and (w.dl == -1 or w.dl > NOW)
end

-- @fn unqueue
-- Take waiter `id` (record `w`, if known) off the queue.
local function unqueue(id, w)
  redis.call('ZREM', K_WAITQ, id)
  redis.call('ZREM', K_WALIVE, id)
  redis.call('HDEL', K_WINFO, id)
  if w and w.re == 1 then
    redis.call('ZREM', BASE .. ':wid:' .. w.h, id)
  end
end

-- @fn drop_waiter
local function drop_waiter(id, w)
  unqueue(id, w)
  if w then
    redis.call('HDEL', K_INFO, '\0' .. w.t)
    redis.call('DEL', BASE .. ':wake:' .. w.t)
  end
end

-- @fn next_waiter
-- Take the head live waiter (priority desc, then arrival) off the queue; dead or
-- timed-out waiters met on the way are dropped (at most SKIP_LIMIT). nil if none.
local function next_waiter()
  for _ = 1, SKIP_LIMIT do
    local head = redis.call('ZRANGE', K_WAITQ, 0, 0)[1]
    if not head then
      return nil
    end
    local w = decode_waiter(redis.call('HGET', K_WINFO, head))
    if w and waiter_alive(w) then
      unqueue(head, w)
      return w
    end
    drop_waiter(head, w)
  end
  return nil
end

-- @fn index_waiter
-- Store waiter `id` (record `w`) in :walive: the last ms at which it counts as
-- alive (waiter_alive).
local function index_waiter(id, w)
  local last = w.alive
  if w.dl ~= -1 and w.dl - 1 < last then
    last = w.dl - 1
  end
  redis.call('ZADD', K_WALIVE, last, id)
end

-- @fn room_to_wait
-- Whether fewer than `max` callers are queued, once the dead or timed-out
-- waiters among them (at most PRUNE_LIMIT, found by :walive wherever they are
-- in the queue) are dropped.
local function room_to_wait(max)
  if redis.call('ZCARD', K_WAITQ) < max then
    return true
  end
  local dead = redis.call('ZRANGEBYSCORE', K_WALIVE, '-inf', '(' .. NOW, 'LIMIT', 0, PRUNE_LIMIT)
  for _, id in ipairs(dead) do
    drop_waiter(id, decode_waiter(redis.call('HGET', K_WINFO, id)))
  end
  return #dead > 0 and redis.call('ZCARD', K_WAITQ) < max
end

-- @fn hand_to_waiter
-- Pools: hand `resource` to the head live waiter. True if a waiter got it.
local function hand_to_waiter(resource)
  if redis.call('ZCARD', K_WAITQ) == 0 then
    return false
  end
  local w = next_waiter()
  if not w then
    return false
  end
  wake(w, resource, grant(resource, w.t, w.h, w.l, true))
  return true
end

-- @fn slot_size
-- Slot modes: the number of permits (a semaphore's stored max size, 0 if none;
-- 1 for a lock).
local function slot_size()
  if MODE == MODE_SEM then
    return tonumber(redis.call('GET', K_MAX) or '0')
  end
  return 1
end

-- @fn free_slots
-- Slot modes: how many permits are free now: the size less one per holder and
-- the semaphore's "\1extra" (the max may have been lowered below what is
-- held: never negative). `size`: the number of permits if already read.
local function free_slots(size)
  size = size or slot_size()
  local used = redis.call('ZCARD', K_LEASES)
  if MODE == MODE_SEM then
    used = used + (tonumber(redis.call('HGET', K_INFO, F_EXTRA)) or 0)
  end
  return math.max(0, size - used)
end

-- @fn share_hold
-- Slot modes: `identity` holds a slot; its queued waiters (other callers with
-- the same identity) share that hold at once, taking no second slot.
local function share_hold(identity)
  local wid = BASE .. ':wid:' .. identity
  for _, id in ipairs(redis.call('ZRANGE', wid, 0, -1)) do
    local w = decode_waiter(redis.call('HGET', K_WINFO, id))
    if w and waiter_alive(w) then
      unqueue(id, w)
      redis.call('HDEL', K_INFO, '\0' .. w.t)
      wake(w, identity, refresh(identity, decode(redis.call('HGET', K_INFO, identity)), w.l))
    else
      drop_waiter(id, w)
      redis.call('ZREM', wid, id)
    end
  end
end

-- @fn grant_slot
-- Slot modes: grant `permits` to `identity`, and share its hold with its
-- waiters unless `no_waiters` says that the queue is empty. (Whether callers
-- share is each waiter's own choice: the caller granted now may not share.)
local function grant_slot(identity, token, lease_ms, provisional, no_waiters, permits)
  local raw = grant(identity, token, identity, lease_ms, provisional, nil, permits)
  if not no_waiters then
    share_hold(identity)
  end
  return raw
end

-- @fn serve_slots
-- Slot modes: give free permits to queued waiters, in queue order (priority,
-- then arrival), head of line: the first live waiter that needs more permits
-- than are free holds up every waiter behind it until they are (it is served
-- at its turn, never starved by smaller ones). A waiter asking for more
-- permits than the max size cannot be served at this size: it keeps its place
-- (served in turn once the max grows) and holds up nobody meanwhile. Dead
-- waiters met on the way are dropped. Returns the priority of the waiter that
-- holds up the queue (a newcomer of a higher one may go first: it would be
-- ahead of it), BLOCKED when no permit is free or the step limit was reached,
-- or nil when no live waiter that fits the max size is left queued.
local function serve_slots()
  if redis.call('ZCARD', K_WAITQ) == 0 then
    return nil
  end
  local size = slot_size()
  local free = free_slots(size)
  local rank = 0  -- waiters before it are too large for this size
  for _ = 1, SERVE_LIMIT + SKIP_LIMIT do
    if free == 0 then
      return BLOCKED
    end
    local id = redis.call('ZRANGE', K_WAITQ, rank, rank)[1]
    if not id then
      return nil
    end
    local w = decode_waiter(redis.call('HGET', K_WINFO, id))
    if not w or not waiter_alive(w) then
      drop_waiter(id, w)
    elseif w.k > size then
      rank = rank + 1
    elseif w.k > free then
      return w.p
    else
      unqueue(id, w)
      -- (A waiter whose identity got a hold meanwhile was served by share_hold,
      -- which may have taken waiters of that identity before `rank` too.)
      wake(w, w.h, grant_slot(w.h, w.t, w.l, true, false, w.k))
      free = free - w.k
      rank = 0
    end
  end
  return BLOCKED
end

-- @fn put_back
-- Make `resource` available: straight to the head waiter, else into avail
-- (slot modes: its slot goes to the queue). `priority`: see make_available.
local function put_back(resource, priority)
  if SLOTS then
    serve_slots()
  elseif ALLOC then  -- (an allocator never queues)
    make_available(resource, priority)
  elseif not hand_to_waiter(resource) then
    make_available(resource)
  end
end

-- @fn end_lease
-- Remove the lease on `resource` (record `rec`) and make the resource (or the
-- lease's permits) available.
local function end_lease(resource, rec)
  redis.call('ZREM', K_LEASES, resource)
  redis.call('HDEL', K_INFO, resource, '\0' .. rec.t)
  if rec.k > 1 then
    add_extra(1 - rec.k)
  end
  put_back(resource, ALLOC and rec.q)
end

-- @fn reclaim
-- Reclaim up to `limit` expired leases; returns {resource, record, ...} (a
-- lease whose record is missing has an empty record).
local function reclaim(limit)
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW, 'LIMIT', 0, limit)
  local ended = {}
  for _, resource in ipairs(expired) do
    local raw = redis.call('HGET', K_INFO, resource)
    if raw then
      end_lease(resource, decode(raw))
    else
      redis.call('ZREM', K_LEASES, resource)
      put_back(resource)
    end
    ended[#ended + 1] = resource
    ended[#ended + 1] = raw or ''
  end
  return ended
end

-- @fn reclaim_due
-- Reclaim expired leases (at most RECLAIM_LIMIT) if the earliest one is due:
-- one cheap read when none is. True if it was (the queue may have been served).
local function reclaim_due()
  local first = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')[2]
  if first and first ~= 'inf' and tonumber(first) <= NOW then
    reclaim(RECLAIM_LIMIT)
    return true
  end
  return false
end

-- @fn take_available
local function take_available()
  local r
  if MODE == MODE_LIFO then
    r = redis.call('ZRANGE', K_AVAIL, '-1', '-1')[1]
  elseif MODE == MODE_RANDOM then
    r = redis.call('ZRANDMEMBER', K_AVAIL)
  else
    r = redis.call('ZRANGE', K_AVAIL, '0', '0')[1]
  end
  if r then
    redis.call('ZREM', K_AVAIL, r)
  end
  return r
end

-- @fn serve_waiters
-- Serve queued waiters from avail or free slots (after a reclaim, a change of
-- size, or a hand-off that gave up on a run of dead waiters). Pools: returns
-- true when it stopped with waiters still queued that it did not reach (a
-- hand-off gave up on SKIP_LIMIT dead ones, or SERVE_LIMIT were served) while
-- a resource may be available: no newcomer may take it ahead of them.
local function serve_waiters()
  if SLOTS then
    return serve_slots()
  end
  for _ = 1, SERVE_LIMIT do
    if redis.call('ZCARD', K_WAITQ) == 0 then
      return false
    end
    local r = take_available()
    if not r then
      return false
    end
    if not hand_to_waiter(r) then
      make_available(r)
      return redis.call('ZCARD', K_WAITQ) > 0
    end
  end
  return redis.call('ZCARD', K_WAITQ) > 0
end

-- @fn next_expiry_ms
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

-- @fn token_state
-- What a request token has: ('granted', resource, record string or nil),
-- ('queued', waiter id) or nil. `s` is the token's entry if already read.
local function token_state(token, s)
  s = s or redis.call('HGET', K_INFO, '\0' .. token)
  if not s then
    return nil
  end
  if string.sub(s, 1, 1) == 'r' then
    local resource = string.sub(s, 2)
    return 'granted', resource, redis.call('HGET', K_INFO, resource)
  end
  return 'queued', string.sub(s, 2)
end

-- @fn shared_with
-- A waiter whose place was given up for a share of its identity's hold
-- (share_hold: another caller of that identity was served) has no token entry
-- left: the share was pushed to its wake list. Returns that hold's resource,
-- record and raw record while the same hold lasts (nil otherwise); the wake
-- list is emptied.
local function shared_with(token)
  local wk = BASE .. ':wake:' .. token
  local pushed = redis.call('LPOP', wk)
  if not pushed then
    return nil
  end
  redis.call('DEL', wk)
  local resource, raw = string.match(pushed, '^([^\n]*)\n(.*)$')
  local now_raw = redis.call('HGET', K_INFO, resource)
  local rec = decode(now_raw)
  if rec and rec.t == decode(raw).t and not is_expired(rec) then
    return resource, rec, now_raw
  end
  return nil
end

-- @fn acquire_request
-- An acquire's packed arguments (see acquire.lua), numbers converted (the
-- permits are 1 but in a semaphore), then what Redis holds for it: the token's
-- entry (set if this is a retry) and, in slot modes, the holder's own lease
-- record and the permits held beyond one per holder ("\1extra", 0 if none).
local function acquire_request(packed)
  local token, lease_ms, priority, wait_ms, max_waiting, alive_ms, restore, permits, holder =
    string.match(packed,
      '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  local mine, held, extra
  if SLOTS then
    local got = redis.call('HMGET', K_INFO, '\0' .. token, holder, F_EXTRA)
    mine, held, extra = got[1], got[2], (got[3] or 0) + 0
  else
    mine = redis.call('HGET', K_INFO, '\0' .. token)
  end
  permits = MODE == MODE_SEM and permits + 0 or 1
  return token, lease_ms + 0, priority + 0, wait_ms + 0, max_waiting + 0, alive_ms + 0, restore,
    permits, holder, mine, held, extra
end

-- @fn renew_request
-- A renew's packed arguments (see renew.lua): the resource, the lease ms, and
-- its lease record if it is held under the token ('' = whoever holds it).
local function renew_request(packed)
  local token, lease_ms, res = string.match(packed, '^([^|]*)|([^|]*)|(.*)$')
  local rec = decode(redis.call('HGET', K_INFO, res))
  if rec and token ~= '' and rec.t ~= token then
    rec = nil
  end
  return res, tonumber(lease_ms), rec
end

-- @fn extend
-- Extend the live lease `rec` on `res` by `lease_ms` (-2: its own duration);
-- returns the new expiry in ms (-1 none).
local function extend(res, rec, lease_ms)
  if lease_ms == -2 then
    lease_ms = rec.l
  end
  set_lease(res, rec, lease_ms)
  return rec.e
end

-- acquire: grant a lease now, or queue the caller as a waiter.
-- args[2] (packed by primitives/wire.py's acquire): token (one per acquire
-- call: running this again returns the same lease or queue place, never a
-- second one) | lease ms (-1 none) | priority | wait (as every operation gets
-- it: -1 forever, 0 do not wait, n > 0 ms left) | max waiting: the most
-- callers queued at once, this one included (-1 no limit; each caller sends
-- its own, nothing is stored) | liveness window ms (the waiter checks in at
-- least this often) | restore: what Redis may have lost, a semaphore's max
-- size to store if none is stored yet, or RESTORE_HEAL for a pool whose caller
-- restores its members (RESTORE_NOTHING: none) | permits (a semaphore's: how
-- many the holder takes; 1 for anything else) | holder (slot modes: the
-- identity asking for a slot).
-- Returns "resource\nrecord" when granted | ms until the next expiry (-1 none)
-- when queued | REPLY_NONE | REPLY_FULL (max waiting callers, dead ones
-- dropped first, are queued already: not queued) | REPLY_UNCONFIGURED (a
-- semaphore without a max size) | REPLY_HELD (lock: the holder already holds
-- it and the lock is not reentrant) | REPLY_EMPTY (RESTORE_HEAL: the pool
-- holds no resource at all, nothing was changed).
-- A semaphore's newcomer takes its permits only if they are free once the
-- queue was served, and no queued waiter that fits the max size goes before it
-- (see serve_slots): while one is queued, a newcomer of its priority or lower
-- waits behind it (or, not waiting, is refused) even if its own permits are free.
-- A pool's newcomer likewise takes a resource only once the queue was served:
-- none while queued waiters were not reached (a hand-off gives up after
-- SKIP_LIMIT dead waiters, leaving the resource available for the next one).
local token, lease_ms, priority, wait_ms, max_waiting, alive_ms, restore, permits, holder, mine,
  held = acquire_request(args[2])
if mine then  -- a retry of this request
  local state, resource, raw = token_state(token, mine)
  if state == 'queued' then
    return next_expiry_ms()
  elseif raw then
    return resource .. '\n' .. raw
  end
  return REPLY_NONE
end

-- Expired leases are reclaimed first (bounded), so that their resources or
-- slots go round, to the queue first.
if SLOTS then
  local size = 1
  if MODE == MODE_SEM then
    size = redis.call('GET', K_MAX)
    if not size then
      if restore == RESTORE_NOTHING then
        return REPLY_UNCONFIGURED
      end
      size = restore
      redis.call('SET', K_MAX, size)
    end
    size = tonumber(size)
  end
  local rec = decode(held)
  local served = false  -- whether the queue was served (a caller of this identity too?)
  if rec and is_expired(rec) then
    end_lease(holder, rec)  -- our own expired hold: reclaimed first
    rec, served = nil, true
  end
  local queued = false
  local ahead  -- the priority of the queued waiter that goes before a newcomer
  if not rec then
    served = reclaim_due() or served
    queued = redis.call('ZCARD', K_WAITQ) > 0
    if queued then
      ahead = serve_slots()  -- the queue goes first
      served = true
    end
    if served then  -- this identity holds if a queued caller of it was served
      held = redis.call('HGET', K_INFO, holder)
      rec = decode(held)
    end
  end
  if rec then
    if MODE == MODE_LOCK then
      return REPLY_HELD
    end
    -- Same identity again: refresh its hold (which keeps the permits it
    -- took, whatever this request asks: one hold, never a second grant over
    -- it), and remember this request so that a retry does not count twice.
    if remembered(token) then
      return holder .. '\n' .. held
    end
    remember(token)
    return holder .. '\n' .. refresh(holder, rec, lease_ms)
  end
  if (not ahead or priority > ahead) and permits <= free_slots(size) then
    return holder .. '\n' .. grant_slot(holder, token, lease_ms, false, not queued, permits)
  end
else
  reclaim_due()
  -- The queue goes first: a newcomer takes nothing while waiters that the
  -- serving did not reach (past a run of dead ones) are queued.
  local passed = redis.call('ZCARD', K_WAITQ) > 0 and serve_waiters()
  local resource = not passed and take_available()
  if resource then
    return resource .. '\n' .. grant(resource, token, holder, lease_ms, false)
  end
  if restore == RESTORE_HEAL and not passed and redis.call('ZCARD', K_LEASES) == 0 then
    return REPLY_EMPTY  -- its keys were lost: the caller restores them, then asks again
  end
end
if wait_ms == 0 then
  return REPLY_NONE
end
if max_waiting >= 0 and not room_to_wait(max_waiting) then
  return REPLY_FULL
end

local id = string.format('%016d', next_seq())
local deadline = -1
if wait_ms > 0 then
  deadline = NOW + wait_ms
end
redis.call('ZADD', K_WAITQ, -priority, id)
local re = 0
if SHARING then
  re = 1
  redis.call('ZADD', BASE .. ':wid:' .. holder, 0, id)
end
local w = {t = token, l = lease_ms, p = priority, s = NOW, dl = deadline,
  alive = NOW + alive_ms + GRACE_MS, re = re, k = permits, h = holder}
redis.call('HSET', K_WINFO, id, encode_waiter(w))
index_waiter(id, w)
redis.call('HSET', K_INFO, '\0' .. token, 'w' .. id)
return next_expiry_ms()

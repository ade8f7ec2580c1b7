-- acquire: grant a lease now, or queue the caller as a waiter.
-- ARGV[2] token (one per acquire call: running this again returns the same
-- lease or queue place, never a second one), ARGV[3] holder (slot modes: the
-- identity asking for a slot), ARGV[4] lease ms (-1 none), ARGV[5] priority,
-- ARGV[6] wait ms (-2 do not wait, -1 forever), ARGV[7] liveness window ms (the
-- waiter checks in at least this often), ARGV[8] the max size to store if none
-- is stored yet ('' none; semaphores).
-- Returns {'granted', record} | {'queued', ms until next expiry} | {'none'}
-- | {'unconfigured'} (a semaphore without a max size) | {'held'} (lock: the
-- holder already holds it and the lock is not reentrant).
local TOKEN, HOLDER = ARGV[2], ARGV[3]
local LEASE_MS, PRIORITY = tonumber(ARGV[4]), tonumber(ARGV[5])
local WAIT_MS, ALIVE_MS = tonumber(ARGV[6]), tonumber(ARGV[7])
local DEFAULT_MAX = ARGV[8]

local state, value = token_state(TOKEN)
if state == 'granted' then
  return {'granted', value}
elseif state == 'queued' then
  return {'queued', next_expiry_ms()}
end

reclaim(RECLAIM_LIMIT)
pump()
if SLOTS then
  if MODE == 'sem' and not redis.call('GET', K_MAX) then
    if DEFAULT_MAX == '' then
      return {'unconfigured'}
    end
    redis.call('SET', K_MAX, DEFAULT_MAX)
  end
  local rec = live_record(HOLDER)
  if rec then
    if MODE == 'lock' then
      return {'held'}
    end
    -- Same identity again: refresh its hold. Remember the reply so that a
    -- retried request does not count twice.
    if remembered(TOKEN) then
      return {'granted', cjson.encode(rec)}
    end
    remember(TOKEN, 1)
    return {'granted', refresh(rec, LEASE_MS)}
  end
  if free_slots() > 0 then
    return {'granted', grant_slot(HOLDER, TOKEN, LEASE_MS, false)}
  end
else
  local resource = take_available()
  if resource then
    return {'granted', grant(resource, TOKEN, HOLDER, LEASE_MS, false)}
  end
end
if WAIT_MS == -2 then
  return {'none'}
end

local id = string.format('%016d', redis.call('INCR', K_SEQ))
local deadline = -1
if WAIT_MS >= 0 then
  deadline = NOW + WAIT_MS
end
redis.call('ZADD', K_WAITQ, -PRIORITY, id)
local re = 0
if SHARING then
  re = 1
  redis.call('ZADD', wid_key(HOLDER), 0, id)
end
redis.call('HSET', K_WINFO, id, cjson.encode({t = TOKEN, h = HOLDER, l = LEASE_MS,
  p = PRIORITY, s = NOW, dl = deadline, alive = NOW + ALIVE_MS + GRACE_MS, re = re}))
redis.call('HSET', K_TOK, TOKEN, 'w:' .. id)
return {'queued', next_expiry_ms()}

-- The lease engine: helpers shared by every lease-engine operation.
--
-- The same source serves two ways of running (see engine.py):
--   * Redis >= 7: one function library holding every operation, loaded once
--     (FUNCTION LOAD), so nothing here is rebuilt per call;
--   * EVALSHA (Redis 6.2, Cluster, or where FUNCTION LOAD is refused): one
--     script per operation, carrying only the helpers it uses (every block
--     below that starts with an "@fn name" line is included only when the
--     operation names it), with begin()'s body and the operation's as its own
--     code (a function of a script is a closure made anew on every run).
-- scripts.py writes the constants below (local NAME = a string or an
-- integer) into the code as literals, and builds after begin() only the keys
-- an operation names (the "@key" lines). Every call starts with begin(keys, args).
--
-- KEYS[1] is the base key, ending in the hash tag; every key is the base plus
-- a suffix, so all of them live in the base's Redis Cluster slot:
--   :avail  ZSET  resource -> order of becoming available (pools; Redis time
--                 in microseconds); allocators: free key -> -priority
--   :leases ZSET  resource -> expiry in ms on the Redis clock ("inf" = none)
--   :info   HASH  resource -> lease record; "\0" .. token -> what that request
--                 token has: "r" .. resource (granted) or "w" .. waiter id
--                 (queued). Holders and identities cannot hold control
--                 characters, so the two never collide. Allocators also keep
--                 "\1due" there: no timer of theirs (lease expiry, end of a
--                 key's lifetime or cooldown) is due before this time in ms
--                 ("inf": none is set), read with the token in one HMGET so
--                 that a malloc skips three index reads; absent = unknown.
--                 Writers of a timer lower it or delete it; ending a timer
--                 leaves it early, which only costs one full malloc.
--                 Semaphores keep "\1extra" there: the permits their holders
--                 take beyond one each (the sum of permits - 1 over the leases
--                 in :leases; absent = 0), so that the permits in use are
--                 ZCARD :leases + "\1extra", read in the acquire's own HMGET.
--                 Kept in the hash of the records it sums, it is lost with
--                 them, never alone.
--   :seq    STRING the last fence, waiter arrival number or allocator turn
--                 given: the Redis clock in microseconds (next_seq), so that
--                 they never go backwards, even when Redis loses data.
--   :waitq  ZSET  waiter id -> -priority (ties: the zero-padded id = arrival)
--   :winfo  HASH  waiter id -> waiter record
--   :walive ZSET  waiter id -> the last ms it counts as alive (the earlier of
--                 its liveness window's end and the ms before its deadline):
--                 an acquire that finds max_waiting callers queued drops the
--                 dead ones by it first, wherever they are in the queue
--   :max    STRING the number of slots (semaphores)
--   Allocators also keep (all bounded by the number of keys or bindings):
--   :keys   HASH  key -> "priority|expires ms (-1: stays for ever)|end of its
--                 cooldown ms (0: none)": membership
--   :order:<p> ZSET  the free keys of priority p -> their turn (a :seq number
--                 taken when the key became free, or, shared, when it was last
--                 handed out): the hand-out order within p, on the whole Redis
--                 clock (no part of it is cut off, so it never wraps)
--   :kexp   ZSET  key -> when it leaves the allocator (keys with a lifetime)
--   :sick   ZSET  key -> end of its cooldown (out of rotation until then)
--   :bind   HASH  soft-binding name -> key;  :bindexp ZSET name -> its expiry
--   Task queues keep (their own operations, queue_*.lua):
--   :t:<id>          HASH  one task: name, params and result (JSON text),
--                    status, attempts, progress (JSON numbers), times ("first"
--                    and "started": the first and the latest delivery's start),
--                    its max attempts, how long it is kept once done ("ttl" ms),
--                    the queries waiting for it ("queries") and "keep" once
--                    somebody enqueued it without waiting (queue_enqueue.lua)
--   :pending:<name>  ZSET  ready task ids by priority, then arrival
--   :sched  ZSET  deferred task id -> when it becomes ready (ms)
--   :inflight ZSET running task id -> deadline (ms): past it, its worker is
--                    presumed dead and the task is delivered again
--   :failed ZSET  failed task id -> when it failed (kept for inspection)
--   :live:<name>     ZSET  worker id -> until when it listens for <name>
--   :wake:<name>     LIST  tokens that wake idle workers of <name>
--   :done:<id>       LIST  pushed when task <id> ends (its querier BLPOPs it);
--                    it lasts as long as the ended task
--   :names  SET   every task name ever enqueued or listened for
--   Rate limiters keep (their own operations, ratelimit_*.lua):
--   :index    ZSET  limited key -> its TAT as last decided (the busiest keys),
--                    written by counts_add.lua off the decisions' path: trimmed
--                    of full buckets (TAT <= now) and held to RATE_INDEX_LIMIT
--                    entries (the fullest dropped) at each write, and expiring
--                    when its latest bucket is full again
--   Each limited key has a base of its own, "<prefix>:{ratelimit:<name>:<key>}"
--   (its own hash tag: a busy limiter spreads over a Cluster's shards), whose
--   ratelimit_decide/refund/status/reset operations keep there:
--   :tat      STRING the key's TAT (GCRA's theoretical arrival time, µs on the
--                    Redis clock), expiring when its bucket is full again
--   :wake:<token>    LIST  a waiter's own wake list (the grant handed to it)
--   :wid:<identity>  ZSET  the queued sharing waiters of one identity
--   :counts HASH  what every process counted (primitives/counts.py): field ->
--                 total since the primitive was first counted
--   :minute:<n> HASH the same fields, counted in unix minute n of the Redis
--                 clock; each lives HISTORY_MS (a day and a minute)
--   :done   HASH  request id -> reply of a finished release (or refresh),
--                 so that a request re-run by redis-py's retry answers the
--                 same. Bounded: it lives DONE_TTL_MS from its first entry,
--                 and past DONE_LIMIT entries it becomes :done:old (replacing
--                 the one before), so the last DONE_LIMIT..2*DONE_LIMIT
--                 replies are always known, and an idle primitive keeps none.
-- args[1] (ARGV[1]) is the mode; an operation's own arguments start at args[2].
-- The operations run on every acquire and release (acquire, release, renew,
-- wait, withdraw) take theirs packed into args[2], joined by "|" with the one
-- that may hold "|" (a holder or a resource) last: one argument to send and
-- one pattern match to read, instead of one per value. The modes:
--   fifo | lifo | random  a pool of named resources, handed out in that order;
--   sem                   permits: a lease's resource is the holder's identity,
--                         which takes the permits it asked for (1 by default);
--                         at most GET :max permits are held at once;
--   lock | rlock          one slot, the resource is the holder; rlock counts
--                         repeated acquires of the same holder (reentrancy);
--   alloc | shared        an allocator's keys: :avail ordered by priority, then
--                         by when they became free; "alloc" leases a key to one
--                         holder, "shared" hands keys out in turn, unleased.
--
-- Lease record (one string, fields split by "|", the holder last since it may
-- hold "|"): token|fence|acquired ms|expires ms (-1 never)|lease ms (-1 none)|
-- provisional (0/1)|acquire count (rlock)|last count-down request|permits
-- (semaphores; 1 for every other lease)|holder
-- Waiter record: token|lease ms|priority|since ms|deadline ms (-1 none)|
-- alive until ms (presumed dead after)|shares its identity's hold (0/1)|
-- permits it asks for|holder

-- The words the scripts and the Python side exchange, never written bare:
-- primitives/protocol.py holds their twins, of the same values.
-- Modes (args[1], MODE):
local MODE_FIFO = 'fifo'        -- a pool: available longest first
local MODE_LIFO = 'lifo'        -- a pool: released last first
local MODE_RANDOM = 'random'    -- a pool: any, at random
local MODE_SEM = 'sem'          -- permits, at most GET :max held at once
local MODE_LOCK = 'lock'        -- one slot
local MODE_RLOCK = 'rlock'      -- one slot, reentrant
local MODE_ALLOC = 'alloc'      -- an allocator's keys, leased
local MODE_SHARED = 'shared'    -- an allocator's keys, in turn, unleased
local MODE_QUEUE = 'queue'      -- a task queue
local MODE_RATELIMIT = 'ratelimit'  -- a rate limiter
-- Replies instead of a grant or a number:
local REPLY_NONE = 'none'                  -- nothing granted, the caller does not wait
local REPLY_SLOW = 'slow'                  -- a *_fast script cannot answer: run the operation
local REPLY_HELD = 'held'                  -- a non-reentrant lock's holder asks again
local REPLY_UNCONFIGURED = 'unconfigured'  -- a semaphore without a max size
local REPLY_EMPTY = 'empty'                -- it holds nothing at all: the caller restores it
local REPLY_GONE = 'gone'                  -- a waiter's place was dropped
local REPLY_MORE = 'more'                  -- bounded work done, no answer yet: call again
local REPLY_FULL = 'full'                  -- max_waiting callers already wait: not queued
-- acquire's restore argument (else a semaphore's max size):
local RESTORE_HEAL = 'heal'     -- a pool whose caller restores its members
local RESTORE_NOTHING = ''
-- Task statuses (the "status" field of :t:<id>):
local TASK_QUEUED = 'queued'
local TASK_RUNNING = 'running'
local TASK_DONE = 'done'
local TASK_FAILED = 'failed'

local BASE, MODE, NOW, NOW_US, SLOTS, SHARING, ALLOC
-- Allocators: "\1due" as read by this call (a number; nil: not read, or unknown)
local DUE
-- The primitive's keys, BASE and a suffix each. A call builds only the keys
-- its operation's code names (the operation's own and its helpers'): after
-- begin(), scripts.py writes "K_... = BASE .. '<suffix>'" for each of them,
-- from these lines.
-- @key K_AVAIL :avail
-- @key K_LEASES :leases
-- @key K_INFO :info
-- @key K_SEQ :seq
-- @key K_WAITQ :waitq
-- @key K_WINFO :winfo
-- @key K_WALIVE :walive
-- @key K_MAX :max
-- @key K_DONE :done
local K_AVAIL, K_LEASES, K_INFO, K_SEQ, K_WAITQ, K_WINFO, K_WALIVE, K_MAX, K_DONE

local RECLAIM_LIMIT = 16     -- expired leases reclaimed per call (bounded work)
local SKIP_LIMIT = 16        -- dead waiters dropped per hand-off
local PRUNE_LIMIT = 32       -- dead waiters dropped by an acquire that finds the queue full
local PUMP_LIMIT = 64        -- resources handed to waiters per call
local DROP_LIMIT = 64        -- ended allocator keys dropped per malloc
local UPKEEP_LIMIT = 16      -- deferred and orphaned tasks handled per take
local RATE_INDEX_LIMIT = 10000  -- a rate limiter's :index entries (the fullest dropped)
local WAKE_TOKENS = 64       -- wake tokens kept per task name
local GRACE_MS = 1000        -- slack on a waiter's liveness window
local PROVISIONAL_MS = 5000  -- life of an unconfirmed grant to a waiter (at most)
local WAKE_TTL_MS = 60000    -- an unread wake list disappears after this
local DONE_TTL_MS = 60000    -- a generation of remembered replies lives this long
local DONE_LIMIT = 1000      -- remembered replies per generation
local HISTORY_MS = 86460000  -- life of a :minute:<n> hash of counts
local OLDEST_CHECKED = 1000  -- live holds a snapshot checks for the oldest
local F_DUE = '\1due'        -- allocators' field in :info (see above)
local F_EXTRA = '\1extra'    -- semaphores' field in :info (see above)
-- What serve_slots answers when it stopped at its step limit: a priority above
-- every caller's, so that no newcomer passes the waiters it did not reach.
-- (Infinity, written so: a function library runs this line when it loads,
-- where the math library is not available yet.)
local BLOCKED = 1 / 0
-- The exception class of a task failed because its worker died on each attempt
-- (the Python class's path: tests check that it imports).
local WORKER_LOST = 'django_redis_pool.primitives.queue.WorkerLost'

-- Numbers: a record's or an argument's digits become a number as `s + 0`, one
-- conversion; Lua 5.1's tonumber(s) converts twice (it checks, then converts)
-- and is kept for what may not be a number. Arguments a command takes as
-- digits are passed as strings where they are constants ('0', '1') or formatted
-- with %d on the hot path: Redis formats a Lua number argument with %.17g, a
-- float's conversion, at four times the cost.
local REC_PATTERN = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
local REC_FORMAT = '%s|%d|%d|%d|%d|%d|%d|%s|%d|%s'
local WAITER_PATTERN = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
local WAITER_FORMAT = '%s|%d|%d|%d|%d|%d|%d|%d|%s'

local function begin(keys, args)
  BASE = keys[1]
  -- The operations with packed arguments get the mode in the same argument
  -- ("mode|packed": one argument less to send): split back into two.
  local mode, packed = string.match(args[1], '^([^|]*)|(.*)$')
  if mode then
    args[1], args[2] = mode, packed
  end
  MODE = args[1]
  DUE = nil
  local t = redis.call('TIME')
  local seconds, micros = t[1] + 0, t[2] + 0
  NOW = seconds * 1000 + math.floor(micros / 1000)
  NOW_US = seconds * 1000000 + micros
  SLOTS = MODE == MODE_SEM or MODE == MODE_LOCK or MODE == MODE_RLOCK
  -- Modes in which a caller shares the hold of its identity (a reentrant
  -- lock's holder acquiring again, a semaphore identity asking twice).
  SHARING = MODE == MODE_SEM or MODE == MODE_RLOCK
  ALLOC = MODE == MODE_ALLOC or MODE == MODE_SHARED
end

-- @fn decode
-- A lease record as a table (nil for nil).
local function decode(raw)
  if not raw then
    return nil
  end
  local t, f, a, e, l, p, n, q, k, h = string.match(raw, REC_PATTERN)
  return {t = t, f = f + 0, a = a + 0, e = e + 0, l = l + 0, p = p + 0, n = n + 0, q = q,
    k = k + 0, h = h}
end

-- @fn encode
local function encode(rec)
  return string.format(REC_FORMAT, rec.t, rec.f, rec.a, rec.e, rec.l, rec.p, rec.n, rec.q, rec.k,
    rec.h)
end

-- @fn decode_waiter
local function decode_waiter(raw)
  if not raw then
    return nil
  end
  local t, l, p, s, dl, alive, re, k, h = string.match(raw, WAITER_PATTERN)
  return {t = t, l = l + 0, p = p + 0, s = s + 0, dl = dl + 0, alive = alive + 0, re = re + 0,
    k = k + 0, h = h}
end

-- @fn encode_waiter
local function encode_waiter(w)
  return string.format(WAITER_FORMAT, w.t, w.l, w.p, w.s, w.dl, w.alive, w.re, w.k, w.h)
end

-- @fn is_expired
local function is_expired(rec)
  return rec.e ~= -1 and rec.e <= NOW
end

-- @fn live_record
-- The live lease record of `resource` (table, raw), or nil.
local function live_record(resource)
  local raw = redis.call('HGET', K_INFO, resource)
  local rec = decode(raw)
  if rec and not is_expired(rec) then
    return rec, raw
  end
  return nil
end

-- @fn set_lease
-- Store `rec` (of `resource`) with a lease of `lease_ms` from now (-1: none);
-- returns the record string. A `provisional` lease (made on a waiter's behalf,
-- not yet confirmed) longer than PROVISIONAL_MS, or without expiry, lasts
-- PROVISIONAL_MS until the waiter confirms it (renew), so a waiter that died
-- before reading its wake list stalls the queue that long, not a whole lease.
-- `extra` (optional): a field and value written to :info in the same HSET.
-- Allocators: the new expiry lowers "\1due" when DUE (read by malloc_fast) is
-- known, else "\1due" is forgotten.
local function set_lease(resource, rec, lease_ms, provisional, extra_field, extra_value)
  local score = 'inf'
  rec.e, rec.l, rec.p = -1, lease_ms, 0
  if provisional and (lease_ms < 0 or lease_ms > PROVISIONAL_MS) then
    rec.e, rec.p = NOW + PROVISIONAL_MS, 1
    score = rec.e
  elseif lease_ms >= 0 then
    rec.e = NOW + lease_ms
    score = rec.e
  end
  local raw = encode(rec)
  if score ~= 'inf' then
    score = string.format('%d', score)
  end
  redis.call('ZADD', K_LEASES, score, resource)
  local fields = {resource, raw}
  if extra_field then
    fields[3], fields[4] = extra_field, extra_value
  end
  if ALLOC and rec.e ~= -1 then
    if not DUE then
      redis.call('HDEL', K_INFO, F_DUE)
    elseif rec.e < DUE then
      fields[#fields + 1], fields[#fields + 2] = F_DUE, rec.e
    end
  end
  redis.call('HSET', K_INFO, unpack(fields))
  return raw
end

-- @fn refresh
-- Slot modes: an identity that already holds a slot asks again. Its lease is
-- refreshed (rlock: its acquire count goes up; the count matters to rlock
-- releases only). An unconfirmed grant stays unconfirmed. Returns the record.
local function refresh(identity, rec, lease_ms)
  rec.n = rec.n + 1
  return set_lease(identity, rec, lease_ms, rec.p == 1)
end

-- @fn next_seq
-- The next number of :seq: the Redis clock in microseconds, or one above the
-- last number if that is not below it (several in one microsecond, or a clock
-- that went back). One SET ... GET, as cheap as an INCR. Numbers only increase,
-- even when :seq itself is lost (a restart without persistence, an eviction, a
-- FLUSHDB) or behind (a failover to a replica that missed the last writes): a
-- later number is still at least the later clock.
local function next_seq()
  local last = (redis.call('SET', K_SEQ, string.format('%d', NOW_US), 'GET') or 0) + 0
  if last < NOW_US then
    return NOW_US
  end
  redis.call('SET', K_SEQ, last + 1)
  return last + 1
end

-- @fn add_extra
-- Semaphores: `delta` more permits taken beyond one per holder ("\1extra");
-- the field is deleted when none is, so that an idle semaphore keeps none.
local function add_extra(delta)
  if redis.call('HINCRBY', K_INFO, F_EXTRA, delta) <= 0 then
    redis.call('HDEL', K_INFO, F_EXTRA)
  end
end

-- @fn grant
-- Record a new lease of `resource` for `token`; returns the record string.
-- `priority` (allocators, optional): the key's priority, kept in the record's
-- request field so that its free needs no read of the key's meta. `permits`
-- (semaphores, optional): how many the lease takes (1 if not given).
local function grant(resource, token, holder, lease_ms, provisional, priority, permits)
  local rec = {t = token, h = holder, f = next_seq(), a = NOW, n = 1,
    q = priority or '', k = permits or 1}
  if rec.k > 1 then
    add_extra(rec.k - 1)
  end
  return set_lease(resource, rec, lease_ms, provisional, '\0' .. token, 'r' .. resource)
end

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

-- @fn wake
-- Push a grant (resource, record) onto waiter `w`'s own wake list (it BLPOPs it).
local function wake(w, resource, raw)
  local wk = BASE .. ':wake:' .. w.t
  redis.call('RPUSH', wk, resource .. '\n' .. raw)
  redis.call('PEXPIRE', wk, WAKE_TTL_MS)
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
  for _ = 1, PUMP_LIMIT + SKIP_LIMIT do
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

-- @fn priority_of
-- Allocators: a free key's priority from its score in :avail (0 - x, not -x,
-- so that priority 0 is never "-0").
local function priority_of(score)
  return 0 - tonumber(score)
end

-- @fn order_key
-- Allocators: the ZSET of the free keys of `priority` (a number or its text).
local function order_key(priority)
  return BASE .. ':order:' .. string.format('%d', tonumber(priority))
end

-- @fn make_available
-- Pools: put `resource` into avail, behind everything already there.
-- Allocators: `resource` becomes free now: before every key of lower priority
-- and behind its equals (a new turn); a key removed meanwhile stays out, and
-- an unhealthy one waits out its cooldown in :sick. `priority`, when the
-- caller knows it (a lease record's, or a key just handed out): the key is
-- known to be in the allocator and healthy, so its meta is not read. Returns
-- its turn (nil if it stayed out).
local function make_available(resource, priority)
  if not ALLOC then
    redis.call('ZADD', K_AVAIL, string.format('%d', NOW_US), resource)
    return
  end
  if not priority or priority == '' then
    local meta = redis.call('HGET', BASE .. ':keys', resource)
    if not meta then
      return
    end
    local sick
    priority, sick = string.match(meta, '^([^|]*)|[^|]*|(.*)$')
    if tonumber(sick) > NOW then
      return
    end
  end
  local turn = next_seq()
  redis.call('ZADD', K_AVAIL, -tonumber(priority), resource)
  redis.call('ZADD', order_key(priority), turn, resource)
  return turn
end

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

-- @fn due
-- Members of ZSET `zset` whose score is due now, at most `limit` (one cheap
-- read when the earliest is not due), and whether `zset` has any member.
local function due(zset, limit)
  local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')[2]
  if not first or tonumber(first) > NOW then
    return {}, first ~= nil
  end
  return redis.call('ZRANGEBYSCORE', zset, '-inf', NOW, 'LIMIT', 0, limit), true
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

-- @fn queue_ready
-- Task queues: make task `id` (of `name`) ready for a worker and wake one idle
-- worker of that name.
local function queue_ready(id, name, priority, seq)
  redis.call('ZADD', BASE .. ':pending:' .. name, -priority * 1099511627776 + seq, id)
  local wake = BASE .. ':wake:' .. name
  redis.call('RPUSH', wake, 1)
  redis.call('LTRIM', wake, -WAKE_TOKENS, -1)
end

-- @fn queue_fields
-- Task queues: the fields of task hash `task` as a flat list, without its
-- params when `skip_params` (the caller has them already).
local function queue_fields(task, skip_params)
  local flat, out = redis.call('HGETALL', task), {}
  for i = 1, #flat, 2 do
    if not (skip_params and flat[i] == 'params') then
      out[#out + 1] = flat[i]
      out[#out + 1] = flat[i + 1]
    end
  end
  return out
end

-- @fn queue_settle
-- Task queues: record the end of task `id`: TASK_DONE with its result (kept for
-- the task's "ttl" ms), or TASK_FAILED with an error message and traceback (kept
-- in :failed until retried or deleted). Wakes whoever waits for it: its :done
-- list lasts as long as the task (a failed task's until it is retried or
-- deleted, so that a query of it long after still reads its end at once).
local function queue_settle(id, status, text, trace)
  local task = BASE .. ':t:' .. id
  local ttl = tonumber(redis.call('HGET', task, 'ttl'))
  local done = BASE .. ':done:' .. id
  redis.call('RPUSH', done, 1)
  if status == TASK_DONE then
    redis.call('HSET', task, 'status', TASK_DONE, 'result', text, 'finished', NOW)
    redis.call('PEXPIRE', task, ttl)
    redis.call('PEXPIRE', done, ttl)
  else
    redis.call('HSET', task, 'status', TASK_FAILED, 'error', text, 'trace', trace, 'finished', NOW)
    redis.call('ZADD', BASE .. ':failed', NOW, id)
    redis.call('PERSIST', done)
  end
end

-- @fn queue_upkeep
-- Task queues: at most `limit` deferred tasks that are due become ready, and
-- at most `limit` tasks whose worker is presumed dead (deadline passed) are
-- delivered again, or failed after their last attempt (dead letter).
-- Returns {made ready, requeued ids, failed ids}. A task failed so is given the
-- error of WORKER_LOST (its class path first, as the worker writes a handler's
-- error) and that line as its traceback. A task delivered again keeps its
-- start times ("first", "started") and its workers.
local function queue_upkeep(limit)
  local sched, inflight = BASE .. ':sched', BASE .. ':inflight'
  local ready = due(sched, limit)
  for _, id in ipairs(ready) do
    redis.call('ZREM', sched, id)
    local got = redis.call('HMGET', BASE .. ':t:' .. id, 'name', 'priority', 'seq')
    if got[1] then
      queue_ready(id, got[1], tonumber(got[2]), tonumber(got[3]))
    end
  end
  local requeued, failed = {}, {}
  for _, id in ipairs(due(inflight, limit)) do
    redis.call('ZREM', inflight, id)
    local task = BASE .. ':t:' .. id
    local got = redis.call('HMGET', task, 'name', 'priority', 'seq', 'attempts', 'max')
    if got[1] and tonumber(got[4]) >= tonumber(got[5]) then
      local error = WORKER_LOST .. ': its worker died or stalled on each of its ' .. got[4] ..
        ' attempt(s)'
      queue_settle(id, TASK_FAILED, error, error .. '\n')
      failed[#failed + 1] = id
    elseif got[1] then
      redis.call('HSET', task, 'status', TASK_QUEUED)
      redis.call('HDEL', task, 'worker')
      queue_ready(id, got[1], tonumber(got[2]), tonumber(got[3]))
      requeued[#requeued + 1] = id
    end
  end
  return {#ready, requeued, failed}
end

-- @fn queue_next_due
-- Task queues: ms until the next deferred task or deadline is due (-1: none).
local function queue_next_due()
  local next_ms = -1
  for _, zset in ipairs({BASE .. ':sched', BASE .. ':inflight'}) do
    local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')[2]
    if first then
      local ms = math.max(0, tonumber(first) - NOW)
      if next_ms < 0 or ms < next_ms then
        next_ms = ms
      end
    end
  end
  return next_ms
end

-- @fn tend_keys
-- Allocators: drop up to `limit` keys whose lifetime ended, and bring back up
-- to `limit` whose cooldown ended. Returns how many of each, and whether any
-- key has a lifetime at all.
local function tend_keys(limit)
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

-- @fn pump
-- Serve queued waiters from avail or free slots (after a reclaim, a change of
-- size, or a hand-off that gave up on a run of dead waiters). Pools: returns
-- true when it stopped with waiters still queued that it did not reach (a
-- hand-off gave up on SKIP_LIMIT dead ones, or PUMP_LIMIT were served) while
-- a resource may be available: no newcomer may take it ahead of them.
local function pump()
  if SLOTS then
    return serve_slots()
  end
  for _ = 1, PUMP_LIMIT do
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

-- @fn remember
-- A finished request, remembered for a retry of the same request (its reply
-- is 1 wherever it is remembered).
-- A generation's first entry comes with a value longer than a small hash's
-- (hash-max-listpack-value, 64 bytes by default), so that Redis keeps it as a
-- hash table from the start: every HSET of a new field scans a listpack
-- (ziplist) hash whole, and that scan cost more than the rest of a release.
local function remember(id)
  redis.call('HSET', K_DONE, id, '1')
  local size = redis.call('HLEN', K_DONE)
  if size == 1 then
    redis.call('HSET', K_DONE, '\1wide', string.rep('-', 80))
    redis.call('PEXPIRE', K_DONE, DONE_TTL_MS)
  elseif size > DONE_LIMIT then
    redis.call('RENAME', K_DONE, K_DONE .. ':old')
  end
end

-- @fn remembered
local function remembered(id)
  return redis.call('HGET', K_DONE, id) or redis.call('HGET', K_DONE .. ':old', id)
end

-- The header of every operation of every family: the keys, the constants,
-- begin() and the helpers they all share. Each family's own helpers are in its
-- package, beside its Python and its operations: leased/engine_lease.lua and
-- leased/engine_alloc.lua (leases, allocators), queue/engine_queue.lua.
--
-- The same source serves two ways of running (see scripts.py, beside this):
--   * Redis >= 7: one function library holding every operation, loaded once
--     (FUNCTION LOAD), so nothing here is rebuilt per call;
--   * EVALSHA (Redis 6.2, Cluster, or where FUNCTION LOAD is refused): one
--     script per operation, carrying only the helpers it uses (every block
--     here and in the engine_*.lua files that starts with an "@fn name" line is included only when the
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
-- wait, withdraw; alloc_malloc, ratelimit_decide) take theirs packed into
-- args[2] (each by its encoder in primitives/wire.py), joined by "|" with the one
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
-- protocol.py (beside this file) holds their twins, of the same values.
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
local SERVE_LIMIT = 64        -- resources handed to waiters per call
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

-- @fn wake
-- Push a grant (resource, record) onto waiter `w`'s own wake list (it BLPOPs it).
local function wake(w, resource, raw)
  local wk = BASE .. ':wake:' .. w.t
  redis.call('RPUSH', wk, resource .. '\n' .. raw)
  redis.call('PEXPIRE', wk, WAKE_TTL_MS)
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

-- alloc_malloc: hand out a key at once (an allocator never queues).
-- args[2] (packed by primitives/wire.py's alloc_malloc, read by
-- malloc_args): request token|lease ms (-1: none)|
-- soft-binding ms|'1' if the caller restores the keys when Redis lost them,
-- else '0', then on lines of their own the soft-binding name ('' none) and
-- the holder (neither holds a control character).
-- "alloc": the key is leased to the holder (a retried request gets the same
-- lease); "shared": the key goes to the back of its priority and is not leased.
-- With a name: the key bound to it if that key is free and healthy, else the
-- next one, and the name is bound to the key handed out.
-- Returns "key\nlease record" ("shared": "key\nfence"), REPLY_NONE,
-- REPLY_EMPTY (the caller restores keys and the allocator holds none at all:
-- nothing handed out), or REPLY_MORE when it dropped DROP_LIMIT keys whose
-- lifetime ended without reaching a live one: each call does bounded work, and
-- the caller calls again.
local fast = malloc_fast(args)
if fast ~= REPLY_SLOW then
  return fast
end
local token, lease_ms, bind_ms, heal, name, holder = malloc_args(args)
if MODE == MODE_ALLOC then
  local state, key, raw = token_state(token)
  if state == 'granted' and raw then
    return key .. '\n' .. raw
  end
  reclaim_due()
end
local _, _, lifetimes = expire_and_heal_keys(RECLAIM_LIMIT)
for _ = 1, DROP_LIMIT do
  local key, priority, popped = pick_key(name)
  if not key then
    if heal == '1' and redis.call('EXISTS', BASE .. ':keys') == 0 then
      return REPLY_EMPTY  -- its keys were lost: the caller restores them, then asks again
    end
    refresh_due()
    return REPLY_NONE
  end
  -- a key whose lifetime ended (beyond what expire_and_heal_keys removed) is dropped
  local ends = lifetimes and redis.call('ZSCORE', BASE .. ':kexp', key)
  if not ends or tonumber(ends) > NOW then
    local reply = hand_out(key, priority, popped, name, tonumber(bind_ms), token, holder,
      tonumber(lease_ms))
    refresh_due()
    return reply
  end
  drop_key(key)
end
return REPLY_MORE

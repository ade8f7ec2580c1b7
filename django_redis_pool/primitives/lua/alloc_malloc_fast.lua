-- alloc_malloc_fast: alloc_malloc's common case, for the EVALSHA path (see
-- acquire_fast): a new request while nothing is due (no expired lease, no
-- ended lifetime or cooldown), so no key needs a check. It answers exactly as
-- alloc_malloc would; anything else returns 'slow' having changed nothing.
-- args: as alloc_malloc's.
local token, lease_ms, bind_ms = string.match(args[2], '^([^|]*)|([^|]*)|(.*)$')
local name, holder = args[3], args[4]
if MODE == 'alloc' then
  if redis.call('HEXISTS', K_INFO, '\0' .. token) == 1 then
    return 'slow'
  end
  local first = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')[2]
  if first and first ~= 'inf' and tonumber(first) <= NOW then
    return 'slow'
  end
end
for _, timers in ipairs({':kexp', ':sick'}) do
  local head = redis.call('ZRANGE', BASE .. timers, 0, 0, 'WITHSCORES')[2]
  if head and tonumber(head) <= NOW then
    return 'slow'
  end
end
local key, popped = pick_key(name)
if not key then
  return 'none'
end
return hand_out(key, popped, name, tonumber(bind_ms), token, holder, tonumber(lease_ms))

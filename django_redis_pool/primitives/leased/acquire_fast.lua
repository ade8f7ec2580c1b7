-- acquire_fast: acquire's common case, for the EVALSHA path. A script defines
-- every helper it carries on each run (a function library does so once), and
-- acquire carries them all; this one carries three. It answers exactly as
-- acquire would when the request is new, nobody is queued and no lease is due
-- to be reclaimed: a grant (a semaphore's of the permits asked, if that many
-- are free), or REPLY_NONE / REPLY_HELD for a caller that does not wait. Anything else returns REPLY_SLOW having changed nothing, and the
-- caller runs acquire itself (so a caller that would queue, max waiting
-- included, is always answered there). args[2]: as acquire's.
local token, lease_ms, _, wait_ms, _, _, restore, permits, holder, mine, held, extra =
  acquire_request(args[2])
if mine or redis.call('ZCARD', K_WAITQ) > 0 then
  return REPLY_SLOW
end
local first = redis.call('ZRANGE', K_LEASES, '0', '0', 'WITHSCORES')[2]
if first and first ~= 'inf' and first + 0 <= NOW then
  return REPLY_SLOW
end
-- (Nothing is due, so every lease, `held` included, is live.)
if SLOTS then
  local size = 1
  if MODE == MODE_SEM then
    size = tonumber(redis.call('GET', K_MAX))
  end
  if not size or (held and MODE ~= MODE_LOCK) then
    return REPLY_SLOW  -- a max size to store, or an identity asking again
  elseif held then
    return REPLY_HELD
  elseif permits <= size - redis.call('ZCARD', K_LEASES) - extra then
    return holder .. '\n' .. grant(holder, token, holder, lease_ms, false, nil, permits)
  end
else
  local resource = take_available()
  if resource then
    return resource .. '\n' .. grant(resource, token, holder, lease_ms, false)
  end
end
if wait_ms == 0 and (restore ~= RESTORE_HEAL or redis.call('ZCARD', K_LEASES) > 0) then
  return REPLY_NONE  -- (a pool with no resource at all may need healing: acquire tells)
end
return REPLY_SLOW

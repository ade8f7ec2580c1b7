-- release_fast: release's common case, for the EVALSHA path (see
-- acquire_fast): a live lease ended by its holder while nobody is queued (an
-- allocator never queues anyone). It answers exactly as release would;
-- anything else (a fence, a force-release, a waiter to hand over to, an
-- expired lease, a reentrant count, a retry) returns REPLY_SLOW having changed
-- nothing, and the caller runs release itself.
-- args[2]: as release's.
local token, req, fence, force, res =
  string.match(args[2], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
if fence ~= '' or force == '1' or (not ALLOC and redis.call('ZCARD', K_WAITQ) > 0) then
  return REPLY_SLOW
end
local rec = decode(redis.call('HGET', K_INFO, res))
if not rec or (token ~= '' and rec.t ~= token) or (MODE == MODE_RLOCK and rec.q == req) or rec.n > 1
    or is_expired(rec) or (token == '' and remembered(req)) then
  return REPLY_SLOW
end
redis.call('ZREM', K_LEASES, res)
redis.call('HDEL', K_INFO, res, '\0' .. rec.t)
if rec.k > 1 then
  add_extra(1 - rec.k)
end
if not SLOTS then
  make_available(res, ALLOC and rec.q)
end
remember(req)
return 1

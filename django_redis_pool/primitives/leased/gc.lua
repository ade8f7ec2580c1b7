-- gc: reclaim up to args[2] expired leases and drop dead waiters among the
-- args[2] waiters starting at queue index args[3].
-- Returns {reclaimed {resource, record, ...}, dropped waiter records, next
-- queue index or -1 when done}.
local limit, offset = tonumber(args[2]), tonumber(args[3])
-- Dead waiters first: a hand-off (reclaim, serve_waiters) skips dead waiters silently.
local ids = redis.call('ZRANGE', K_WAITQ, offset, offset + limit - 1)
local dropped = {}
for _, id in ipairs(ids) do
  local raw = redis.call('HGET', K_WINFO, id)
  local w = decode_waiter(raw)
  if not w or not waiter_alive(w) then
    drop_waiter(id, w)
    dropped[#dropped + 1] = raw or encode_waiter({t = '', l = -1, p = 0, s = 0, dl = -1,
      alive = 0, re = 0, k = 1, h = id})
  end
end
local queued = redis.call('ZCARD', K_WAITQ)
local reclaimed = reclaim(limit)
serve_waiters()
-- Waiters served by those hand-offs left the queue too: rescan rather than skip.
local served = queued - redis.call('ZCARD', K_WAITQ)
local next_offset = -1
if #ids == limit then
  next_offset = math.max(0, offset + limit - #dropped - served)
end
return {reclaimed, dropped, next_offset}

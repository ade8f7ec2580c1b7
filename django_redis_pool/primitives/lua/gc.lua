-- gc: reclaim up to ARGV[2] expired leases and drop dead waiters among the
-- ARGV[2] waiters starting at queue index ARGV[3].
-- Returns {reclaimed lease records, dropped waiter records (JSON), next queue
-- index or -1 when done}.
local LIMIT, OFFSET = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Dead waiters first: a hand-off (reclaim, pump) skips dead waiters silently.
local ids = redis.call('ZRANGE', K_WAITQ, OFFSET, OFFSET + LIMIT - 1)
local dropped = {}
for _, id in ipairs(ids) do
  local raw = redis.call('HGET', K_WINFO, id)
  local w = raw and cjson.decode(raw)
  if not w or not waiter_alive(w) then
    drop_waiter(id, w)
    table.insert(dropped, raw or cjson.encode({h = id, p = 0, s = 0, dl = -1}))
  end
end
local queued = redis.call('ZCARD', K_WAITQ)
local reclaimed = reclaim(LIMIT)
pump()
-- Waiters served by those hand-offs left the queue too: rescan rather than skip.
local served = queued - redis.call('ZCARD', K_WAITQ)
local next_offset = -1
if #ids == LIMIT then
  next_offset = math.max(0, OFFSET + LIMIT - #dropped - served)
end
return {reclaimed, dropped, next_offset}

-- counts_add: add one process's counts of the primitive (primitives/counts.py)
-- into its totals (:counts) and into the current minute of the Redis clock
-- (:minute:<unix minute>, dropped HISTORY_MS later).
-- args[2]: the request id (a retried run adds nothing twice); then field,
-- increment pairs. Returns 1, or 0 if this request was added already.
if remembered(args[2]) then
  return 0
end
local minute = BASE .. ':minute:' .. math.floor(NOW / 60000)
for i = 3, #args, 2 do
  redis.call('HINCRBY', BASE .. ':counts', args[i], args[i + 1])
  redis.call('HINCRBY', minute, args[i], args[i + 1])
end
redis.call('PEXPIRE', minute, HISTORY_MS)
remember(args[2], 1)
return 1

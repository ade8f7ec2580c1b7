-- alloc_read: an allocator's own reads, on the Redis clock. args[2] what:
--   'has' args[3] key -> 1/0;  'len' -> number of keys;
--   'keys' args[3] cursor args[4] count -> {next cursor ('0': done), keys};
--   'key' args[3] key -> {"priority|expires ms" or false (not a key), end of
--     its cooldown in ms or false (none, or over), its live lease record or
--     false};
--   'sick' args[3] offset args[4] count -> {total, {key, until ms, ...}};
--   'binds' args[3] offset args[4] count -> {now, total live, {name, key,
--     expiry ms, ...}} (soonest expiry last).
local what = args[2]
local K_KEYS = BASE .. ':keys'
if what == 'has' then
  return redis.call('HEXISTS', K_KEYS, args[3])
elseif what == 'len' then
  return redis.call('HLEN', K_KEYS)
elseif what == 'keys' then
  local reply = redis.call('HSCAN', K_KEYS, args[3], 'COUNT', tonumber(args[4]))
  local keys = {}
  for i = 1, #reply[2], 2 do
    keys[#keys + 1] = reply[2][i]
  end
  return {reply[1], keys}
elseif what == 'key' then
  local key = args[3]
  local _, raw = live_record(key)
  local sick = redis.call('ZSCORE', BASE .. ':sick', key)
  return {redis.call('HGET', K_KEYS, key) or false,
    sick and tonumber(sick) > NOW and sick or false, raw or false}
elseif what == 'sick' then
  local offset, count = tonumber(args[3]), tonumber(args[4])
  local sick = BASE .. ':sick'
  return {redis.call('ZCOUNT', sick, '(' .. NOW, '+inf'),
    redis.call('ZRANGEBYSCORE', sick, '(' .. NOW, '+inf', 'WITHSCORES', 'LIMIT', offset, count)}
elseif what == 'binds' then
  local offset, count = tonumber(args[3]), tonumber(args[4])
  local exp = BASE .. ':bindexp'
  local names = redis.call('ZREVRANGEBYSCORE', exp, '+inf', '(' .. NOW, 'WITHSCORES', 'LIMIT',
    offset, count)
  local out = {}
  for i = 1, #names, 2 do
    out[#out + 1] = names[i]
    out[#out + 1] = redis.call('HGET', BASE .. ':bind', names[i]) or ''
    out[#out + 1] = names[i + 1]
  end
  return {NOW, redis.call('ZCOUNT', exp, '(' .. NOW, '+inf'), out}
end
return redis.error_reply('unknown allocator read ' .. tostring(what))

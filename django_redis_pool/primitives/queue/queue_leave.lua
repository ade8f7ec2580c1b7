-- queue_leave: a worker stops listening. args[2] worker id, args[3] its names
-- joined by "\n".
for name in string.gmatch(args[3], '[^\n]+') do
  redis.call('ZREM', BASE .. ':live:' .. name, args[2])
end
return 1

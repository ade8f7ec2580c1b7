-- queue_halt: a listen() is stopping; wake its idle workers at once. args[2] the
-- listen's id, args[3] how many workers it runs, args[4] ms the tokens last (a
-- listen killed before it deletes them leaves nothing behind).
local halt = BASE .. ':halt:' .. args[2]
for _ = 1, tonumber(args[3]) do
  redis.call('RPUSH', halt, 1)
end
redis.call('PEXPIRE', halt, tonumber(args[4]))
return 1

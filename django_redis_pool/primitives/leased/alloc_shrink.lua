-- alloc_shrink: remove keys from an allocator, free or held (a holder's renew
-- or free then finds its key gone). args[2..] keys. Returns how many were keys.
local removed = 0
for i = 2, #args do
  removed = removed + drop_key(args[i])
end
return removed

-- alloc_malloc_fast: alloc_malloc's common case (malloc_fast), for the
-- EVALSHA path (see acquire_fast).
return malloc_fast(args)

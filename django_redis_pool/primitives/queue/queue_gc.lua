-- queue_gc: bounded upkeep, as every take does: at most args[2] deferred tasks
-- made ready and args[2] tasks of dead workers requeued or failed.
-- Returns {made ready, requeued ids, failed ids}.
return queue_upkeep(tonumber(args[2]))

"""The task queue: :class:`.taskqueue.TaskQueue`'s operations (enqueue, take,
finish, redelivery, the dead letter), the :class:`.task.Task` and its JSON
record, and the workers of ``listen()`` (:mod:`.worker`). Its Lua is beside
them. This package imports nothing when it loads.
"""

#: The family's named operations, each ``<op>.lua`` beside this file.
OPERATIONS = (
    "queue_enqueue",
    "queue_take",
    "queue_beat",
    "queue_leave",
    "queue_halt",
    "queue_finish",
    "queue_progress",
    "queue_withdraw",
    "queue_collect",
    "queue_admin",
    "queue_gc",
    "queue_read",
)
#: On the EVALSHA path: operation -> the script of its common case: none.
FAST: dict[str, str] = {}
#: The family's helper file: the task queue's helpers.
HELPERS = ("engine_queue",)

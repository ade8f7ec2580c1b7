"""``manage.py pool_worker``: run the ``@task`` handlers of the configured queues.

The task-queue kind owns this command (:class:`django_redis_pool.kinds.queue.WorkerCommand`,
documented there and in docs/queue.md); Django finds commands only in this
folder, so this module only names it.
"""

from ...kinds.queue import WorkerCommand as Command

__all__ = ["Command"]

"""The example's task handler (found by django-redis-pool when Django starts,
as every installed app's ``tasks.py``): ``manage.py pool_worker`` runs it."""

import time

from django_redis_pool import Task, task


@task("count", queue="default")
def count(job: Task) -> dict[str, int]:
    """Count to ``params["to"]``, a step every 0.2 s, reporting progress."""
    to = int(job.params["to"])
    for i in range(1, to + 1):
        time.sleep(0.2)
        job.update(i, to)
    return {"counted": to}

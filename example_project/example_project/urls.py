"""URLs of the example project."""

from django.contrib import admin
from django.urls import path

from django_redis_pool.metrics import metrics_view

from . import task_pages, tour, views

urlpatterns = [
    path("", tour.index, name="index"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("printers/", views.printers, name="printers"),
    path("print/", views.print_job, name="print"),
    path("report/", views.report, name="report"),
    path("import/", views.run_import, name="import"),
    path("fetch/", views.fetch, name="fetch"),
    path("task/", task_pages.tasks, name="task"),
    path("client/", views.use_client, name="client"),
    path("search/", views.search, name="search"),
    path("task/<str:task_id>/", task_pages.task_status, name="task-status"),
    path("metrics/", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
]

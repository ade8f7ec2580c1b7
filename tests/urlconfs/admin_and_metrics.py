"""URLconf for the test suite: the admin and the metrics."""

from django.contrib import admin
from django.urls import path

from django_redis_pool.metrics import metrics_view

urlpatterns = [path("admin/", admin.site.urls), path("metrics/", metrics_view)]

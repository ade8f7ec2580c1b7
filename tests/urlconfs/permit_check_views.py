"""URLconf for the E038/E039 check tests: ``@with_resource(permits=)`` on a
pool (E038), more permits than the semaphore's MAX_SIZE (E039), and within it."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_redis_pool.decorators import with_resource


@with_resource("printers", permits=2)
def pool_with_permits(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("jobs", permits=5)
def too_many(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("jobs", permits=4)
def just_enough(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [
    path("pool/", pool_with_permits),
    path("many/", too_many),
    path("enough/", just_enough),
]

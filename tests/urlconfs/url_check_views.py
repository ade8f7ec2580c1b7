"""URLconf for the E023 check tests: views decorated with @with_resource."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils.decorators import method_decorator
from django.views import View

from django_redis_pool.decorators import with_resource


@with_resource("printers")
def configured(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("scanners")
def misspelt(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@method_decorator(with_resource("plotters"), name="dispatch")
class PlotView(View):
    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("ok")


nested = [path("scan/", misspelt), path("again/", misspelt)]
urlpatterns = [
    path("ok/", configured),
    path("nested/", include(nested)),
    path("plot/", PlotView.as_view()),
]

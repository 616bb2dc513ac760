"""URL routes of the control plane."""

from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, JsonResponse
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness probe."""
    return JsonResponse({"status": "ok"})


#: The API docs page (Swagger UI, from static files): its setup script is a file too (the split view), and it sets
#: inline styles, the one thing the site's Content-Security-Policy allows it beyond the rest.
API_DOCS = csp_update({"style-src": ["'unsafe-inline'"]})(SpectacularSwaggerSplitView.as_view(url_name="api-schema"))

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico where a page names no icon (the live partials, the JSON views, the admin).
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.svg"), permanent=True)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("fleet.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", API_DOCS, name="api-docs"),
    path("", include("fleet.web.urls")),
]

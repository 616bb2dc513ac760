"""The web UI's Django app."""

from django.apps import AppConfig


class WebConfig(AppConfig):
    """The server-rendered UI: pages under ``/``, templates in ``templates/web/``."""

    name = "fleet.web"
    label = "web"
    verbose_name = "ProxyFleet UI"

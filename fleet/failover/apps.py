"""The failover app's Django config."""

from django.apps import AppConfig


class FailoverConfig(AppConfig):
    """Failover policies, events with their timelines, fences and backend status history."""

    name = "fleet.failover"
    label = "failover"
    verbose_name = "ProxyFleet failover"

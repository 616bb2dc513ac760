"""The benchmark jobs app's Django config."""

from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Benchmark targets, jobs (scheduled through django-celery-beat) and their runs' results."""

    name = "fleet.bench"
    label = "bench"
    verbose_name = "ProxyFleet benchmarks"

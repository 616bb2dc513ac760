"""Benchmark jobs: the bench engine (``fleet.bench.engine``, free of Django) and the Django app that schedules its
runs on the Celery queue ``bench``, stores their results and charts them (docs/benchmarks.md, docs/control-plane.md).
"""

"""Benchmarks: ``make bench`` runs ``python -m tests.bench.run_bench`` (sysbench, direct vs haproxy vs ProxyFleet)."""

"""The benchmark programs: ``make bench`` runs ``python -m devstack.bench.run_bench`` (sysbench, direct vs haproxy vs
ProxyFleet), ``make bench-failover`` ``devstack.bench.failover_bench``; ``mirror_bench`` and ``field_notes`` are run
by hand (docs/benchmarks.md says how)."""

"""The bench engine: workloads as scripts (``script``, with MyCat's templates from ``generators``), built-in
workloads (``workloads``), targets as DSNs (``targets``), plans and their checks (``runner``, ``plans``), the asyncio
runner over the proxy's own MySQL client (``shard``, one or several processes), sysbench as a driver (``sysbench``),
the result form (``results``, ``recorder``), charts (``plot``) and the command line (``cli``).

It never imports Django: ``python -m fleet.bench.engine`` runs it alone, and the control plane's jobs run the same
code (``fleet.bench.service``).
"""

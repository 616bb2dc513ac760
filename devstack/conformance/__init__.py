"""``make conformance``: real clients' own test suites (Django's on MySQL and PostgreSQL, asyncpg's) run direct and
through a ProxyFleet node, their outcomes compared test by test (docs/compatibility.md). Plain Python: the suites run
as subprocesses in a virtualenv of their own under ``var/conformance``; nothing here imports Django."""

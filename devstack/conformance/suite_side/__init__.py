"""Modules loaded inside the suites' own processes (``var/conformance/venv``), put on their ``PYTHONPATH`` as plain
top-level modules: standalone, they import nothing of ProxyFleet's. Each writes the journal the harness reads
(``devstack/conformance/journal.py``): a JSON line when a test starts and one with its outcome."""

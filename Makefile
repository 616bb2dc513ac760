# The README's commands: `make run`, `make test`, `make clean`.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed

.PHONY: deps sysdeps lint build test test-unit run bench bench-pinned bench-instructions bench-kernel-calls bench-compare bench-failover bench-sharding bench-hot-rows bench-pgsql conformance txmodel test-sharding-long clean

# The virtualenv with requirements.txt installed, and the Debian packages.
deps: sysdeps $(STAMP)

sysdeps:
	@bash deploy/install-system-deps.sh

# Redone whenever requirements.txt changes (the stamp is older than it).
$(STAMP): requirements.txt | sysdeps
	@test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy proxyapp

# The proxy's hot modules compiled with mypyc into var/build/native (a no-op while they are up to date).
build: deps
	$(PY) -m proxyapp build

test: deps lint build
	PROXYFLEET_REQUIRE_NATIVE=1 $(VENV)/bin/pytest

# The tests that need nothing outside the test process (no sandbox, proxy process, web server or browser), all of
# tests/unit: under a minute, for the edit-test loop; `make test` runs everything (tests/unit and tests/live).
test-unit: deps
	$(VENV)/bin/pytest -q tests/unit

run: deps build
	$(PY) -m devstack.run_demo

bench: deps build
	$(PY) -m devstack.bench.run_bench $(BENCH_ARGS)

# The same with the proxy under test on a CPU of its own and the server and sysbench on the others (steadier rounds).
bench-pinned: deps build
	$(PY) -m devstack.bench.run_bench --pin $(BENCH_ARGS)

# Instructions per point select in the proxy, counted by callgrind (the regression check that machine noise does
# not move); a minute or two (BENCH_ARGS='--queries N --threads N', '--cache' for the simulated caches' misses).
bench-instructions: deps build
	$(PY) -m devstack.bench.instructions $(BENCH_ARGS)

# System calls and context switches per point select, ProxyFleet beside haproxy (perf, /proc); a minute or two
# (BENCH_ARGS='--threads N').
bench-kernel-calls: deps build
	$(PY) -m devstack.bench.kernel_calls $(BENCH_ARGS)

# This checkout's proxy beside another revision's (built in a git worktree under var/bench/compare), in interleaved
# rounds of point selects: qps and each proxy's CPU per query, a change's effect without the machine's drift between
# two runs; about 10 minutes with the build (BENCH_ARGS='REV --threads N --rounds R'; REV defaults to HEAD).
bench-compare: deps build
	$(PY) -m devstack.bench.compare $(BENCH_ARGS)

# Failover timings with default settings (kill -9 of the primary under writes): the "Failover" section of
# docs/benchmarks.md; about 40 s a run (BENCH_ARGS='--runs N', default 3).
bench-failover: deps build
	$(PY) -m devstack.bench.failover_bench $(BENCH_ARGS)

# Sharding through the proxy (2 and 4 shards) against one server direct: the "Sharding" section of
# docs/benchmarks.md; about 6 minutes a run (BENCH_ARGS='--rounds N --time S', default 3 rounds of 5 s).
bench-sharding: deps build
	$(PY) -m devstack.bench.sharding_bench $(BENCH_ARGS)

# Hot rows (issue 15): the hint-queued transfer over 1,000 and 10 rows at 1 to 256 connections, direct, through a
# proxy without the transaction queue and through one with it, and other traffic on the two proxies: the "Hot rows:
# the transaction queue" section of docs/benchmarks.md; about 10 minutes a run (BENCH_ARGS='--rounds N', default 2;
# '--quick' tries the harness in a minute and writes var/bench-hot-rows/section.md instead of the docs).
bench-hot-rows: deps build
	$(PY) -m devstack.bench.hot_rows $(BENCH_ARGS)

# PostgreSQL (issue 16): pgbench -S and TPC-B-like, simple and prepared, 16 and 1,000 clients, direct vs PgBouncer
# (transaction pooling) vs ProxyFleet's forwarding listener vs ProxyFleet's pooler: the "PostgreSQL: pgbench, direct vs
# PgBouncer vs ProxyFleet" section of docs/benchmarks.md; about 35 minutes a run (BENCH_ARGS='--rounds N --time S
# --targets ...', default 2 rounds of 20 s; '--quick' tries the harness in about 8 minutes and writes
# var/bench-pgsql/section.md instead of the docs).
bench-pgsql: deps build
	$(PY) -m devstack.bench.pgsql_bench $(BENCH_ARGS)

# Real clients' own test suites, direct and through a proxy node, compared test by test (issue 39): Django's on MySQL
# and on PostgreSQL (through the pooler) and asyncpg's (through the pooler and a forwarding listener), from pinned
# sdists fetched from PyPI into var/conformance; the table and var/conformance/report.json; about 20 minutes
# (CONFORMANCE_ARGS='--suite NAME' for one suite, '--ci' for the subset make test runs, '--write-docs' to write
# docs/compatibility.md). It fails on a proxy-only failure that devstack/conformance/by_design.toml and
# known_defects.toml do not name.
conformance: deps build
	$(PY) -m devstack.conformance $(CONFORMANCE_ARGS)

# The model-based transaction test at length (tests/support/txmodel.py; make test runs it small):
# BENCH_ARGS-style flags in TXMODEL_ARGS, e.g. TXMODEL_ARGS='--walkers 16 --steps 5000 --seed 7'.
txmodel: deps build
	$(PY) -m tests.support.txmodel $(TXMODEL_ARGS)

# The sharding tests at length (make test runs both small): the differential test (tests/support/sharding_diff.py),
# 30 seeds of 1000 statements over 2 and 4 shards of its own against the server on 127.0.0.1:3306, about 15
# minutes, more flags in DIFF_ARGS, e.g. DIFF_ARGS='--seed 100 --seeds 5 --all', failing on a mismatch no open defect
# explains; then 40 runs of concurrent transfers over 2 shards (tests/support/transfers.py), the proxy killed and
# restarted in half of them, about 12 minutes, more flags in TRANSFER_ARGS, failing on any balance the clients were
# not told, any XA error to a client, anything left open.
test-sharding-long: deps build
	$(PY) -m tests.support.sharding_diff --seed 1 --seeds 30 --statements 1000 --shards 2 4 $(DIFF_ARGS)
	$(PY) -m tests.support.transfers --runs 40 --writers 4 --transfers 400 --restart-every 2 $(TRANSFER_ARGS)

# Takes down every sandbox under var/ (the dev one, test runs', benchmarks'; MariaDB's and PostgreSQL's) before
# removing var/.
clean:
	@if [ -x $(PY) ]; then \
	  for state in $$(find var -name sandbox.json 2>/dev/null); do \
	    $(PY) -m devstack.sandboxes mysql down --dir "$$(cd "$$(dirname "$$state")" && pwd)"; \
	  done; \
	  for state in $$(find var -name pgsandbox.json 2>/dev/null); do \
	    $(PY) -m devstack.sandboxes pgsql down --dir "$$(cd "$$(dirname "$$state")" && pwd)"; \
	  done; \
	fi
	rm -rf var

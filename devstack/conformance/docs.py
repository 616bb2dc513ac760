"""``docs/compatibility.md`` from a JSON report: the prose (what runs, how, what the lists mean), then the run's
date, commit, table, and the differing tests by kind.

    python -m devstack.conformance.docs [REPORT]    # default var/conformance/report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from devstack.conformance.compare import BY_DESIGN, FLAKY, KNOWN_DEFECT, PROXY_ONLY, Finding
from devstack.conformance.report import COLUMNS, TargetReport, beside, from_json
from devstack.stack import REPO

DOC = REPO / "docs" / "compatibility.md"

PROSE = """\
# Compatibility: real clients' own test suites through ProxyFleet

`make conformance` (`python -m devstack.conformance`, `devstack/conformance/`) runs real clients' own test suites
twice, direct to the server and through a ProxyFleet node, and compares their outcomes test by test. A test that
passes direct and fails through the proxy is a **proxy-only failure**: the proxy changed what the client sees.

## What runs

- **Django's test suite on MySQL** (`django-mysql`): Django 5.2.19's `tests/runtests.py` from its sdist, over
  mysqlclient, `--parallel 2`, on the apps listed in `devstack/conformance/django_suite.py` (basic, transactions,
  queries, select_for_update, backends, model_fields, aggregation, expressions, migrations, schema, fixtures and
  about thirty more). `direct` is MariaDB at 127.0.0.1:3306 as root; `proxy` is a proxy process with one hostgroup
  holding that server and the user `conformance` (made by the harness, every privilege) in `mysql_users`, default
  config otherwise. Django's parallel runner clones its test databases with `mysqldump` and `mysql` through the same
  host and port, so the clone goes through the proxy too.
- **Django's test suite on PostgreSQL** (`django-pgsql`): the same apps over psycopg 3; `direct` is PostgreSQL at
  127.0.0.1:5432 as `conformance` (a superuser role the harness makes), `pooler` is the pooling proxy
  (`pgsql-interfaces`, `conformance` in `pgsql_users`, transaction pooling), `forward` a `pgsql_forward_listeners`
  port on the same node, and `pgbouncer` PgBouncer beside them (below). All run serially (`--parallel 1`):
  Django's parallel runner clones the test database with `CREATE DATABASE ... TEMPLATE`, which PostgreSQL refuses
  while any session is connected to the template, and a pooler keeps the idle server connection the migrations ran
  on (PgBouncer too). The harness drops the test databases `WITH (FORCE)` before each run, so that a run cut off
  while a pooler held them does not stop the next one.
- **asyncpg's test suite** (`asyncpg`): asyncpg 0.32.0's `tests/` from its sdist under pytest, pointed at an
  existing server with `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD` and `PGDATABASE` (asyncpg's `_testbase` then uses
  it instead of starting a cluster of its own, and skips the tests that need one); `direct`, `pooler`, `forward`
  and `pgbouncer`.

**PgBouncer as the reference.** The PostgreSQL suites also run through PgBouncer in transaction pooling mode
(`devstack/pgbouncer.py`: every database of the server, `conformance` by SCRAM, 20 server connections, and
`max_prepared_statements = 200` when the version has it, 1.21 and later). It is Debian's (1.18 on Debian 12) unless
`PGBOUNCER=/path/to/pgbouncer` names another, such as a release built from its source elsewhere (the last run
below names the version that ran). Its differences from direct are its own: no list names them, a rerun tells the
flaky ones, and they never fail the run. The table "Beside PgBouncer" lists, per suite and target, the tests that
fail through the target and pass through PgBouncer, and the other way round (flaky ones left out).

The sdists are downloaded from PyPI at pinned versions and checked against the sha256 pinned in
`devstack/conformance/sources.py`, cached and unpacked under `var/conformance/`; nothing of them is in the
repository. The suites run in a virtualenv of their own, `var/conformance/venv` (Django from its sdist, the drivers
at requirements.txt's versions). Every test's start and outcome is written to a journal as it happens (a Django
test runner and a pytest plugin of the harness's, `devstack/conformance/suite_side/`). A test that runs past its
limit (180 s for Django's, 120 s for asyncpg's) is interrupted and counted as an error. A whole run has a watchdog
(75 minutes for Django's, 15 minutes per asyncpg test file): when it fires, the test that was running is counted as
hung, those that never ran as missing, and the harness goes on with the next run.
Direct and proxied runs use databases of different names.

## How to run it

```sh
make conformance                                       # all three suites, about 35 minutes
make conformance CONFORMANCE_ARGS='--suite asyncpg'    # one suite
make conformance CONFORMANCE_ARGS='--ci'               # the CI subset that make test runs
make conformance CONFORMANCE_ARGS='--write-docs'       # and write this page from the run
python -m devstack.conformance.docs                    # write this page from the last full report
```

It prints a table per suite and target and, under it, each proxy-only failure with the exceptions of its traceback
(the first of a chain is often the cause) and the traceback's end, and
writes `var/conformance/report.json` (`report-ci.json` for `--ci`); each run's log and journal are under
`var/conformance/runs/`. It exits 1 when a comparison has a proxy-only failure or a run went wrong (its watchdog
stopped it, no test ran, the proxy logged a traceback).

`make test` runs the CI subset (`tests/live/devstack/test_conformance.py`): Django's basic, transactions,
model_fields, queries, select_for_update and backends on MySQL, direct and through the proxy, compared the same way.

## What the columns and lists mean

- **direct passed / proxy passed**: the tests that passed in each run (the tests column counts the direct run's).
- **proxy-only**: passed direct, failed, errored, hung or never ran through the proxy, listed in neither file
  below, and the same again when run once more direct and through the proxy, in the same context (Django's whole
  selection of apps, asyncpg's whole test file: a test can fail through the proxy because an earlier test of the
  same worker left the connection's transaction broken, and alone it would pass). Each one fails the run.
- **by design**: differences ProxyFleet keeps on purpose, each with its reason, in
  `devstack/conformance/by_design.toml`. Django's must stay empty.
- **known defects**: open proxy defects, each with the issue whose fix removes it, in
  `devstack/conformance/known_defects.toml`; kept apart from the by-design list. An entry whose tests pass through
  the proxy again is reported as stale.
- **flaky**: a differing test that, run once more, failed direct too or passed through the proxy; named with that
  evidence, never dropped. Both runs' logs and journals are under `var/conformance/runs/` (`rerun-*`).

Tests that fail direct already (the server's or the client's, not the proxy's) and tests skipped only through the
proxy are listed in the JSON report.
"""


def _why(finding: Finding) -> str:
    """A finding's outcome through the proxy and its note (a flaky test's note says both)."""
    if finding.kind == FLAKY:
        return finding.note
    return f"{finding.proxy.status}: {finding.note}" if finding.note else finding.proxy.status


def _section(report: TargetReport) -> list[str]:
    if report.reference:
        lines = [f"### {report.suite} / {report.target} (reference)", ""]
        failing = "Fail through it and pass direct, again when rerun"
    else:
        lines = [f"### {report.suite} / {report.target}", ""]
        failing = "Proxy-only failures"
    for kind, title in ((PROXY_ONLY, failing), (KNOWN_DEFECT, "Known defects"),
                        (BY_DESIGN, "By design"), (FLAKY, "Flaky")):  # fmt: skip
        found = report.of(kind)
        if not found:
            continue
        lines.append(f"{title} ({len(found)}):")
        lines.append("")
        lines += [f"- `{f.test}` ({_why(f)})" for f in found]
        lines.append("")
    lines += [f"- {p}" for p in report.problems]
    if len(lines) == 2:
        lines.append("No difference.")
    return lines if lines[-1] == "" else [*lines, ""]


def render(doc: dict[str, object]) -> str:
    """The page for a JSON report."""
    reports = from_json(doc)
    durations = ", ".join(f"{name} {seconds / 60:.0f} min" for name, seconds in doc["suite_seconds"].items())  # type: ignore[attr-defined]
    lines = [PROSE, "## The last run", ""]
    lines.append(f"{doc['date']}, commit `{doc['commit']}`, {doc['mode']} run ({durations}).")
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r.row()) + " |" for r in reports]
    lines.append("")
    sides = beside(reports)
    if sides:
        lines += [f"### Beside PgBouncer ({doc.get('pgbouncer', 'version unknown')})", ""]
        lines += ["| suite | target | fail through the target, pass through PgBouncer | the other way round |"]
        lines += ["|---|---|---|---|"]
        lines += [f"| {b.suite} | {b.target} | {len(b.worse)} | {len(b.better)} |" for b in sides]
        lines.append("")
        for b in sides:
            for tests, what in ((b.worse, f"fail through {b.target} and pass through PgBouncer"),
                                (b.better, f"fail through PgBouncer and pass through {b.target}")):  # fmt: skip
                if tests:
                    lines += [f"{b.suite}: {len(tests)} {what}:", "", *(f"- `{t}`" for t in tests), ""]
    for r in reports:
        lines += _section(r)
    return "\n".join(lines).rstrip() + "\n"


def write(report: Path, doc_path: Path = DOC) -> None:
    """Write the page from the JSON report at ``report``."""
    doc_path.write_text(render(json.loads(report.read_text())))


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "var" / "conformance" / "report.json")

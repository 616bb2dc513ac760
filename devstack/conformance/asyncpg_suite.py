"""asyncpg's own test suite (``tests/`` of the pinned sdist) on one endpoint: each test file in a pytest process of
its own in the suites' virtualenv, against an existing server (``PGHOST`` and friends: asyncpg's ``_testbase`` then
uses it instead of starting a cluster), with the journaling plugin (``suite_side/conformance_pytest.py``),
pytest-timeout per test and a watchdog per file: a hung test is named and the next file runs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from devstack.conformance import sources
from devstack.conformance.journal import Outcome, read_journal
from devstack.conformance.process import Finished, run_bounded
from devstack.conformance.targets import Endpoint, fresh_pgsql_database

SUITE_SIDE = Path(__file__).resolve().parent / "suite_side"
#: A test running longer than this fails (pytest-timeout, signal method: the file goes on).
TEST_TIMEOUT_S = 120
#: The bound of one file's pytest process, whatever happens inside it.
FILE_TIMEOUT_S = 15 * 60
#: The files of the CI subset: none, asyncpg runs in ``make conformance`` only.
CI_FILES: tuple[str, ...] = ()


@dataclass(frozen=True)
class AsyncpgRun:
    """One run of the suite: each test's outcome, each file's end and the log."""

    outcomes: dict[str, Outcome]
    files: dict[str, Finished]
    log: Path
    seconds: float


def database_name(target: str) -> str:
    """The database the suite's tests use through ``target`` (made afresh for each run)."""
    return f"conformance_asyncpg_{target}"


def test_files() -> list[str]:
    """The suite's test files, relative to the sdist's tree (``tests/test_x.py``)."""
    tree = sources.ASYNCPG.tree
    return sorted(str(p.relative_to(tree)) for p in (tree / "tests").glob("test_*.py"))


def environment(endpoint: Endpoint, journal: Path) -> dict[str, str]:
    """The suite's environment: the endpoint as libpq's variables, the journal, the plugin on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(
        PGHOST=endpoint.host,
        PGPORT=str(endpoint.port),
        PGUSER=endpoint.user,
        PGPASSWORD=endpoint.password,
        PGDATABASE=database_name(endpoint.name),
        PYTHONPATH=str(SUITE_SIDE),
        CONFORMANCE_JOURNAL=str(journal),
    )
    return env


def run(endpoint: Endpoint, selection: list[str], workdir: Path) -> AsyncpgRun:
    """The suite's files (``tests/test_x.py``) or test ids (``tests/test_x.py::Class::test``) in ``selection``,
    each file in its own pytest process, on ``endpoint``; journal and log under ``workdir``."""
    started = time.monotonic()
    sources.prepare()
    pytest = sources.VENV / "bin" / "pytest"  # not ``python -m``: the sdist's own uncompiled asyncpg must not load
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    journal, log = workdir / "journal.jsonl", workdir / "log.txt"
    journal.unlink(missing_ok=True)
    log.unlink(missing_ok=True)
    fresh_pgsql_database(database_name(endpoint.name))
    by_file: dict[str, list[str]] = {}
    for item in selection:
        by_file.setdefault(item.partition("::")[0], []).append(item)
    files = {}
    for file, items in by_file.items():
        command = [str(pytest), "-p", "conformance_pytest", "-p", "no:cacheprovider", "-q"]
        command += ["--timeout", str(TEST_TIMEOUT_S), "--timeout-method", "signal", *items]
        env = environment(endpoint, journal)
        files[file] = run_bounded(command, cwd=sources.ASYNCPG.tree, env=env, log=log, timeout=FILE_TIMEOUT_S)
    return AsyncpgRun(read_journal(journal), files, log, time.monotonic() - started)

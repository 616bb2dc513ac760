"""The suites the harness runs and their targets: Django's on MySQL (direct, through the proxy), Django's on
PostgreSQL and asyncpg's (direct, through the pooler and the forwarding listener, and through PgBouncer beside them),
each with how it runs a selection of tests, reruns it for the tests that differ, and starts the proxy (and PgBouncer)
in front of its server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from devstack.conformance import asyncpg_suite, django_suite
from devstack.conformance.compare import outcome
from devstack.conformance.journal import Outcome
from devstack.conformance.process import Finished
from devstack.conformance.targets import (
    MYSQL_DIRECT,
    PGSQL_DIRECT,
    Endpoint,
    MysqlProxy,
    PgbouncerReference,
    PgsqlProxy,
    drop_pgsql_databases,
    ensure_mysql_user,
    ensure_pgsql_user,
)


@dataclass(frozen=True)
class SuiteRun:
    """A run of a suite on one endpoint: each test's outcome, its wall time, and what went wrong with the run
    itself (a watchdog that stopped it, no test at all)."""

    outcomes: dict[str, Outcome]
    seconds: float
    problems: list[str] = field(default_factory=list)


def _problems(finished: list[Finished], outcomes: dict[str, Outcome], log: Path) -> list[str]:
    problems = [f"the watchdog stopped a run after {f.seconds:.0f} s (log: {log})" for f in finished if f.timed_out]
    if not outcomes:
        problems.append(f"no test ran (log: {log})")
    return problems


@contextmanager
def pgsql_endpoints(workdir: Path, targets: tuple[str, ...]) -> Iterator[dict[str, Endpoint]]:
    """A proxy node in front of the PostgreSQL at 127.0.0.1:5432 (``pooler``, ``forward``), and PgBouncer when
    ``targets`` has ``pgbouncer``, while the block runs: the endpoint of each target."""
    with ExitStack() as stack:
        endpoints = stack.enter_context(PgsqlProxy(workdir))
        if "pgbouncer" in targets:
            endpoints["pgbouncer"] = stack.enter_context(PgbouncerReference(workdir / "pgbouncer"))
        yield endpoints


@dataclass(frozen=True)
class DjangoSuite:
    """Django's suite on one database engine."""

    name: str
    engine: str
    direct: Endpoint
    targets: tuple[str, ...]
    parallel: int = django_suite.PARALLEL
    apps: tuple[str, ...] = django_suite.APPS
    ci_apps: tuple[str, ...] = django_suite.CI_APPS

    def selection(self, ci: bool) -> list[str]:
        """The apps of the full run, or of the CI subset."""
        return list(self.ci_apps if ci else self.apps)

    def prepare(self) -> None:
        """Make the user the runs log in as."""
        if self.engine == "mysql":
            ensure_mysql_user()
        else:
            ensure_pgsql_user()

    @contextmanager
    def proxies(self, workdir: Path) -> Iterator[dict[str, Endpoint]]:
        """The proxy in front of the engine's server while the block runs: the endpoint of each target."""
        if self.engine == "mysql":
            with MysqlProxy(workdir) as endpoint:
                yield {"proxy": endpoint}
        else:
            with pgsql_endpoints(workdir, self.targets) as endpoints:
                yield endpoints

    def run(self, endpoint: Endpoint, selection: list[str], workdir: Path) -> SuiteRun:
        """``runtests.py`` over the selection with the suite's ``--parallel``, on PostgreSQL after the test
        databases a run through the pooler may have left were dropped."""
        if self.engine == "postgresql":
            drop_pgsql_databases(django_suite.database_name(self.engine, endpoint.name))
        result = django_suite.run(self.engine, endpoint, selection, workdir, parallel=self.parallel)
        problems = _problems([result.finished], result.outcomes, result.log)
        return SuiteRun(result.outcomes, result.finished.seconds, problems)

    def lookup(self, test: str, outcomes: dict[str, Outcome]) -> Outcome:
        """A test's outcome in a rerun (an error outside a test: its class's tests' when it did not recur)."""
        return django_suite.outcome_of(test, outcomes)

    def rerun(self, endpoint: Endpoint, tests: list[str], selection: list[str], workdir: Path) -> dict[str, Outcome]:
        """The whole selection again, as in the run: a test that fails through the proxy because an earlier test of
        the same worker broke the connection's transaction fails again only after that test, in that order."""
        return self.run(endpoint, selection, workdir).outcomes


@dataclass(frozen=True)
class AsyncpgSuite:
    """asyncpg's suite, on PostgreSQL."""

    name: str = "asyncpg"
    direct: Endpoint = PGSQL_DIRECT
    targets: tuple[str, ...] = ("pooler", "forward", "pgbouncer")

    def selection(self, ci: bool) -> list[str]:
        """Every test file (the CI subset has none)."""
        return list(asyncpg_suite.CI_FILES) if ci else asyncpg_suite.test_files()

    def prepare(self) -> None:
        """Make the role the runs log in as."""
        ensure_pgsql_user()

    @contextmanager
    def proxies(self, workdir: Path) -> Iterator[dict[str, Endpoint]]:
        """The proxy in front of PostgreSQL while the block runs (its pooler and its forwarding listener), and
        PgBouncer."""
        with pgsql_endpoints(workdir, self.targets) as endpoints:
            yield endpoints

    def run(self, endpoint: Endpoint, selection: list[str], workdir: Path) -> SuiteRun:
        """The selected files, one pytest process each."""
        result = asyncpg_suite.run(endpoint, selection, workdir)
        problems = _problems(list(result.files.values()), result.outcomes, result.log)
        return SuiteRun(result.outcomes, result.seconds, problems)

    def lookup(self, test: str, outcomes: dict[str, Outcome]) -> Outcome:
        """A test's outcome in a rerun."""
        return outcome(test, outcomes)

    def rerun(self, endpoint: Endpoint, tests: list[str], selection: list[str], workdir: Path) -> dict[str, Outcome]:
        """The whole files of the tests again, as in the run (a test may depend on what ran before it in its file)."""
        return asyncpg_suite.run(endpoint, sorted({t.partition("::")[0] for t in tests}), workdir).outcomes


Suite = DjangoSuite | AsyncpgSuite

SUITES: dict[str, Suite] = {
    "django-mysql": DjangoSuite("django-mysql", "mysql", MYSQL_DIRECT, ("proxy",)),
    # Serial: Django's parallel runner clones the test database with CREATE DATABASE ... TEMPLATE, which PostgreSQL
    # refuses while a pooler keeps the idle server connection the migrations ran on (docs/compatibility.md).
    "django-pgsql": DjangoSuite(
        "django-pgsql", "postgresql", PGSQL_DIRECT, ("pooler", "forward", "pgbouncer"), parallel=1
    ),
    "asyncpg": AsyncpgSuite(),
}
#: The suites of the CI subset (``make test``).
CI_SUITES = ("django-mysql",)

"""Django's own test suite (``tests/runtests.py`` from the pinned sdist) on one endpoint: a settings module written
under ``var/conformance/settings``, ``runtests.py`` run in the suites' virtualenv with the journaling runner
(``suite_side/conformance_runner.py``), bounded per test and as a whole."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from devstack.conformance import sources
from devstack.conformance.journal import Outcome, read_journal
from devstack.conformance.process import Finished, run_bounded
from devstack.conformance.targets import Endpoint

SUITE_SIDE = Path(__file__).resolve().parent / "suite_side"
SETTINGS_DIR = sources.HOME / "settings"

#: The apps of the full run (issue 39).
APPS = (
    "basic",
    "transactions",
    "queries",
    "select_for_update",
    "backends",
    "model_fields",
    "aggregation",
    "aggregation_regress",
    "expressions",
    "get_or_create",
    "bulk_create",
    "update",
    "delete",
    "ordering",
    "lookup",
    "timezones",
    "many_to_one",
    "many_to_many",
    "select_related",
    "prefetch_related",
    "annotations",
    "db_functions",
    "model_inheritance",
    "raw_query",
    "null_queries",
    "dates",
    "datetimes",
    "custom_lookups",
    "fixtures",
    "schema",
    "migrations",
    "introspection",
    "inspectdb",
    "serializers",
    "one_to_one",
    "m2m_through",
    "generic_relations",
    "custom_pk",
    "defer",
    "update_only_fields",
    "signals",
    "filtered_relation",
    "constraints",
    "indexes",
    "model_indexes",
    "expressions_window",
    "from_db_value",
    "force_insert_update",
)
#: The apps of the CI subset (``make test``).
CI_APPS = ("basic", "transactions", "model_fields", "queries", "select_for_update", "backends")
PARALLEL = 2
#: A test running longer than this is interrupted (SIGALRM in its process) and counted as an error.
TEST_TIMEOUT_S = 180
#: The bound of one ``runtests.py`` run, whatever happens inside it.
RUN_TIMEOUT_S = 75 * 60
ENGINES = {"mysql": "django.db.backends.mysql", "postgresql": "django.db.backends.postgresql"}


@dataclass(frozen=True)
class DjangoRun:
    """One ``runtests.py`` run: each test's outcome, how the run ended and where its files are."""

    outcomes: dict[str, Outcome]
    finished: Finished
    log: Path


def database_name(engine: str, target: str) -> str:
    """The test database of an engine and target (``other``'s has ``_other`` after it): direct and proxy runs never
    share one."""
    return f"test_conformance_{engine}_{target}"


def settings_module(engine: str, endpoint: Endpoint) -> str:
    """The settings of Django's test suite for ``endpoint``, as Django's own ``test_sqlite.py`` has them with the
    backend's DATABASES (charset utf8mb4 on MySQL, as Django's docs advise)."""
    name = database_name(engine, endpoint.name)
    options: dict[str, object] = {}
    if engine == "mysql":
        options = {"charset": "utf8mb4", "read_timeout": TEST_TIMEOUT_S * 2}
    databases = {
        alias: {
            "ENGINE": ENGINES[engine],
            "HOST": endpoint.host,
            "PORT": endpoint.port,
            "USER": endpoint.user,
            "PASSWORD": endpoint.password,
            "NAME": "postgres" if engine == "postgresql" else name,
            "OPTIONS": options,
            "TEST": {"NAME": name if alias == "default" else f"{name}_other"},
        }
        for alias in ("default", "other")
    }
    return (
        f'"""Written by devstack/conformance/django_suite.py: Django\'s test suite on {engine}, {endpoint.name}."""\n\n'
        f"DATABASES = {databases!r}\n"
        'SECRET_KEY = "django_tests_secret_key"\n'
        'PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]\n'
        'DEFAULT_AUTO_FIELD = "django.db.models.AutoField"\n'
        "USE_TZ = False\n"
        'TEST_RUNNER = "conformance_runner.JournalRunner"\n'
    )


def label_of(test: str) -> str:
    """The label of a test id: the id itself, or the class an error outside a test names (``setUpClass
    (app.tests.Class)``)."""
    holder = re.fullmatch(r"\w+ \((.+)\)", test)
    return holder.group(1) if holder else test


def outcome_of(test: str, outcomes: dict[str, Outcome]) -> Outcome:
    """``test``'s outcome in a run of its label: its own, or for an error outside a test the worst of its class's
    tests (passed when they all did); ``missing`` when the run has neither."""
    if test in outcomes:
        return outcomes[test]
    prefix = label_of(test) + "."
    members = [o for t, o in outcomes.items() if t.startswith(prefix)]
    if not members:
        return Outcome("missing", "the rerun has no outcome for it")
    bad = [o for o in members if not o.ok]
    return bad[0] if bad else Outcome("passed")


def run(engine: str, endpoint: Endpoint, labels: list[str], workdir: Path, *, parallel: int = PARALLEL) -> DjangoRun:
    """``runtests.py`` over ``labels`` (apps or test ids) on ``endpoint``; its journal and log under ``workdir``."""
    python = sources.prepare()
    tests_dir = sources.DJANGO.tree / "tests"
    SETTINGS_DIR.mkdir(parents=True, exist_ok=True)
    module = f"conformance_{engine}_{endpoint.name}"
    (SETTINGS_DIR / f"{module}.py").write_text(settings_module(engine, endpoint))
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    journal, log = workdir / "journal.jsonl", workdir / "log.txt"
    journal.unlink(missing_ok=True)
    log.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": f"{SETTINGS_DIR}:{SUITE_SIDE}",
        "CONFORMANCE_JOURNAL": str(journal),
        "CONFORMANCE_TEST_TIMEOUT": str(TEST_TIMEOUT_S),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    command = [str(python), "runtests.py", "--settings", module, "--noinput", "--verbosity", "2"]
    command += ["--parallel", str(parallel), *labels]
    finished = run_bounded(command, cwd=tests_dir, env=env, log=log, timeout=RUN_TIMEOUT_S)
    return DjangoRun(read_journal(journal), finished, log)

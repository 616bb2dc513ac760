"""Django's suite: the settings module written for an endpoint, and what a rerun of a test runs and finds."""

from __future__ import annotations

from devstack.conformance.django_suite import label_of, outcome_of, settings_module
from devstack.conformance.journal import Outcome
from devstack.conformance.targets import MYSQL_DIRECT, PGSQL_DIRECT, Endpoint


def settings_of(engine: str, endpoint: Endpoint) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(settings_module(engine, endpoint), namespace)
    return namespace


def test_mysql_settings_name_the_endpoint_with_utf8mb4_and_test_databases_of_their_own() -> None:
    direct = settings_of("mysql", MYSQL_DIRECT)
    proxied = settings_of("mysql", Endpoint("proxy", 6033, "conformance", "pw"))
    default = direct["DATABASES"]["default"]  # type: ignore[index]
    assert default["ENGINE"] == "django.db.backends.mysql"
    assert (default["HOST"], default["PORT"], default["USER"]) == ("127.0.0.1", 3306, "root")
    assert default["OPTIONS"]["charset"] == "utf8mb4"
    names = {
        s["DATABASES"][alias]["TEST"]["NAME"]  # type: ignore[index]
        for s in (direct, proxied)
        for alias in ("default", "other")
    }
    assert names == {
        "test_conformance_mysql_direct",
        "test_conformance_mysql_direct_other",
        "test_conformance_mysql_proxy",
        "test_conformance_mysql_proxy_other",
    }
    assert proxied["DATABASES"]["other"]["PORT"] == 6033  # type: ignore[index]
    assert direct["TEST_RUNNER"] == "conformance_runner.JournalRunner"
    assert direct["PASSWORD_HASHERS"] == ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert direct["USE_TZ"] is False and direct["DEFAULT_AUTO_FIELD"] == "django.db.models.AutoField"


def test_postgresql_settings_connect_to_the_postgres_database_first() -> None:
    default = settings_of("postgresql", PGSQL_DIRECT)["DATABASES"]["default"]  # type: ignore[index]
    assert default["ENGINE"] == "django.db.backends.postgresql"
    assert (default["NAME"], default["TEST"]["NAME"]) == ("postgres", "test_conformance_postgresql_direct")
    assert default["OPTIONS"] == {}


def test_an_error_outside_a_test_reruns_its_class_and_takes_its_tests_outcome() -> None:
    assert label_of("transactions.tests.AtomicTests.test_commit") == "transactions.tests.AtomicTests.test_commit"
    holder = "setUpClass (backends.mysql.tests.IsolationLevelTests)"
    assert label_of(holder) == "backends.mysql.tests.IsolationLevelTests"
    passed = {"backends.mysql.tests.IsolationLevelTests.test_a": Outcome("passed")}
    failed = {**passed, "backends.mysql.tests.IsolationLevelTests.test_b": Outcome("error", "boom")}
    assert outcome_of(holder, passed) == Outcome("passed")
    assert outcome_of(holder, failed) == Outcome("error", "boom")
    assert outcome_of(holder, {holder: Outcome("error", "again")}) == Outcome("error", "again")
    assert outcome_of(holder, {}).status == "missing"

"""One validation for every way a row arrives (issue 42): a node's ``parse_config``, a ``proxysql.cnf`` import, a
document import and the REST API refuse the same rows with the same message (the web form's test is in the
browser, ``tests/live/fleet/web/test_admin_browser.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User as Account

from fleet.core import proxysql_cnf, publishing, roles
from fleet.core.models import Cluster
from proxyapp.config.document import ConfigError, parse_config
from tests.support.control_plane import client_for, seed_document

pytestmark = pytest.mark.django_db

#: Rows each path must refuse: (table, the API's resource, a valid row, the column, a bad value, the message).
REFUSED = [
    ("mysql_users", "users", {"username": "reporter"}, "username", "", "may not be empty"),
    ("mysql_users", "users", {"username": "reporter"}, "username", "   ", "may not be empty"),
    ("pgsql_users", "pgsql-users", {"username": "reporter"}, "username", "", "may not be empty"),
    (
        "mysql_users",
        "users",
        {"username": "reporter"},
        "max_connections",
        2**31,
        "2147483648 is above the maximum 2147483647",
    ),
    (
        "mysql_servers",
        "servers",
        {"hostname": "db", "hostgroup_id": 10},
        "hostgroup_id",
        2**31,
        "2147483648 is above the maximum 2147483647",
    ),
    (
        "mysql_query_rules",
        "query-rules",
        {"rule_id": 5, "match_digest": "^SELECT"},
        "flagOUT",
        2**31,
        "2147483648 is above the maximum 2147483647",
    ),
]


def cnf_group(row: dict[str, Any]) -> str:
    """A row as a ``proxysql.cnf`` group."""
    return "{ " + " ".join(f"{key}={value!r}".replace("'", '"') for key, value in row.items()) + " }"


def by_node(table: str, row: dict[str, Any], cluster: Cluster, operator: Account) -> list[str]:
    try:
        parse_config(seed_document(**{table: [row]}))
    except ConfigError as error:
        return error.errors
    return []


def by_import(table: str, row: dict[str, Any], cluster: Cluster, operator: Account) -> list[str]:
    try:
        publishing.import_document(cluster, seed_document(**{table: [row]}), operator)
    except ConfigError as error:
        return error.errors
    return []


def by_cnf(table: str, row: dict[str, Any], cluster: Cluster, operator: Account) -> list[str]:
    try:
        proxysql_cnf.import_cnf(cluster, f"{table} = ( {cnf_group(row)} )\n", operator)
    except ConfigError as error:
        return error.errors
    return []


PATHS: dict[str, Callable[[str, dict[str, Any], Cluster, Account], list[str]]] = {
    "node": by_node,
    "import": by_import,
    "cnf": by_cnf,
}


@pytest.mark.parametrize(("table", "resource", "valid", "column", "bad", "message"), REFUSED)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_refuses_the_same_row_with_the_same_message(
    path: str,
    table: str,
    resource: str,
    valid: dict[str, Any],
    column: str,
    bad: object,
    message: str,
    cluster: Cluster,
    accounts: dict[str, Account],
) -> None:
    operator = accounts[roles.OPERATOR]
    assert PATHS[path](table, valid, cluster, operator) == []
    errors = PATHS[path](table, {**valid, column: bad}, cluster, operator)
    assert len(errors) == 1 and errors[0].endswith(f"{column}: {message}"), errors


@pytest.mark.parametrize(("table", "resource", "valid", "column", "bad", "message"), REFUSED)
def test_the_api_refuses_the_same_row_with_the_same_message(
    table: str,
    resource: str,
    valid: dict[str, Any],
    column: str,
    bad: object,
    message: str,
    cluster: Cluster,
    accounts: dict[str, Account],
) -> None:
    operator = client_for(accounts[roles.OPERATOR])
    refused = operator.post(f"/api/v1/{resource}/", {**valid, column: bad}, format="json")
    assert refused.status_code == 400 and refused.json() == {column: [message]}

"""MySQL passwords at rest: sealed in the control plane's database with a key kept outside it, plain to the code."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from fleet.bench.models import BenchTarget
from fleet.core import publishing, sealing
from fleet.core.drafts import save_row
from fleet.core.models import Cluster
from fleet.core.models.tables import PgsqlServer, PgsqlUser, User, Variable
from fleet.failover.models import FailoverPolicy
from proxyapp.config.document import parse_config
from tests.support.control_plane import MONITOR_SECRET, SECRET

BENCH_SECRET = "b3nch-target-pw"
FAILOVER_SECRETS = ("fail0ver-admin-pw", "repl1cation-pw")


@pytest.fixture
def key_file(settings: Any, tmp_path: Path) -> Path:
    """A key file of this test's own (made on first use), so that rotating does not touch the run's."""
    settings.FLEET_SEALING_KEY = ""
    settings.FLEET_SEALING_KEY_FILE = str(tmp_path / "keys" / "sealing.key")
    return Path(settings.FLEET_SEALING_KEY_FILE)


def every_stored_text() -> str:
    """Every cell of every table of the control plane's database, as the database holds it."""
    cells: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            cells.extend(str(cell) for row in cursor.fetchall() for cell in row)
    return "\n".join(cells)


def status() -> str:
    out: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            out.append(text)

    call_command("sealing", "status", stdout=Sink())
    return "".join(out)


def test_every_password_is_sealed_in_the_database_and_plain_to_the_code(key_file: Path, cluster: Cluster) -> None:
    version = publishing.publish(cluster, None, "sealed")
    BenchTarget.objects.create(name="t", host="127.0.0.1", port=3306, user="sbtest", password=BENCH_SECRET)
    admin, replication = FAILOVER_SECRETS
    FailoverPolicy.objects.create(
        cluster=cluster, writer_hostgroup=10, admin_password=admin, replication_password=replication
    )
    stored = every_stored_text()
    for secret in (SECRET, MONITOR_SECRET, BENCH_SECRET, *FAILOVER_SECRETS):
        assert secret not in stored, secret
    assert stored.count(sealing.PREFIX) == 2 + 2 + 1 + 2  # the draft's two, the version's two, the target, the policy
    assert '"variable_value": "2"' in stored.replace('":"', '": "')  # other variables stay readable
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700

    # The code (the publish, the node's document, the bench runner, failover) sees them as typed.
    assert User.objects.get(cluster=cluster).password == SECRET
    monitor = Variable.objects.get(cluster=cluster, variable_name="mysql-monitor_password")
    assert monitor.variable_value == MONITOR_SECRET
    document = type(version).objects.get(pk=version.pk).document
    assert document["mysql_users"][0]["password"] == SECRET
    assert parse_config(document).checksum == version.checksum
    assert BenchTarget.objects.get().password == BENCH_SECRET
    policy = FailoverPolicy.objects.get()
    assert (policy.admin_password, policy.replication_password) == FAILOVER_SECRETS
    assert status().strip() == "7 secrets sealed, 0 in plain text"


def test_a_pgsql_user_s_password_is_sealed_like_a_mysql_user_s(key_file: Path, cluster: Cluster) -> None:
    """pgsql_users' password (clear text or a verifier, a secret either way) is sealed in the draft and in the
    version, and plain to the code and the node's document."""
    pg_secret = "pg-cl3ar-pw"
    save_row(PgsqlServer(cluster=cluster, hostgroup_id=100, hostname="127.0.0.1"), None)
    save_row(PgsqlUser(cluster=cluster, username="app_pg", password=pg_secret, default_hostgroup=100), None)
    version = publishing.publish(cluster, None, "a PostgreSQL user")
    stored = every_stored_text()
    assert pg_secret not in stored
    assert stored.count(sealing.PREFIX) == 3 + 3  # the draft's three secrets, the version's three
    assert PgsqlUser.objects.get(cluster=cluster).password == pg_secret
    document = type(version).objects.get(pk=version.pk).document
    assert document["pgsql_users"][0]["password"] == pg_secret
    assert parse_config(document).checksum == version.checksum


def test_plain_passwords_from_before_sealing_read_and_get_sealed(key_file: Path, cluster: Cluster) -> None:
    """A database from before sealing (what the migration finds): its plain values read as they are, and
    ``sealing seal`` (the migration's step) seals them."""
    user = User.objects.get(cluster=cluster)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {User._meta.db_table} SET password = %s WHERE id = %s", ["old-plain-pw", user.pk])
    assert User.objects.get(pk=user.pk).password == "old-plain-pw"
    assert status().strip() == "1 secrets sealed, 1 in plain text"
    call_command("sealing", "seal", stdout=None)
    assert status().strip() == "2 secrets sealed, 0 in plain text"
    assert "old-plain-pw" not in every_stored_text()
    assert User.objects.get(pk=user.pk).password == "old-plain-pw"
    assert sealing.seal_in_migration("core")(apps, None) is None  # the migration's step: nothing left to do twice


def test_rotating_the_key_reseals_everything_and_drops_the_old_key(key_file: Path, cluster: Cluster) -> None:
    publishing.publish(cluster, None, "before the rotation")
    old_key = key_file.read_text()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT password FROM {User._meta.db_table}")
        (sealed_before,) = cursor.fetchone()
    call_command("sealing", "rotate", stdout=None)
    assert key_file.read_text() != old_key and len(key_file.read_text().split()) == 1
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert status().strip() == "4 secrets sealed, 0 in plain text"
    assert User.objects.get(cluster=cluster).password == SECRET
    with pytest.raises(sealing.SealingError, match="wrong or lost key"):
        sealing.unseal(sealed_before)  # the old key is gone from the file


def test_a_wrong_key_says_so_and_never_reads_as_a_password(key_file: Path, settings: Any, cluster: Cluster) -> None:
    settings.FLEET_SEALING_KEY_FILE = str(key_file.parent / "another.key")
    with pytest.raises(sealing.SealingError, match=r"cannot be opened with the keys in .*another\.key"):
        User.objects.get(cluster=cluster)
    with pytest.raises(CommandError, match="wrong or lost key"):
        status()
    settings.FLEET_SEALING_KEY = "not-a-key"
    with pytest.raises(sealing.SealingError, match="not a Fernet key"):
        sealing.seal("x")

"""Concurrent transfers over two shards (``tests.support.transfers``), a bounded run for ``make test``: four writers
committing, rolling back, deadlocking, killed, gone and restarted with the proxy, and every account as the clients
were told, no XA error to any of them, nothing left open. ``make test-sharding-long`` runs forty."""

from __future__ import annotations

from pathlib import Path

from devstack.sandbox import Sandbox
from tests.support.transfers import Rig, run_all


def test_concurrent_transfers_keep_every_balance_and_show_no_xa_error(
    sandbox: Sandbox, other: Sandbox, tmp_path: Path
) -> None:
    with Rig([sandbox.primary(), other.primary()], tmp_path / "proxy") as rig:
        reports = list(run_all(rig, iter((1, 2)), writers=4, transfers=80, restart_every=2))
    for report in reports:
        assert report.ok, report.summary()
        assert report.committed > 100 and report.not_committed > 20  # the run did what it says
    assert sum(r.errors[1213] + r.errors[1205] for r in reports) + sum(r.errors[2013] for r in reports) > 0

"""The model-based transaction test (``tests/support/txmodel.py``) at the size CI runs; ``make txmodel`` runs a long
one."""

from __future__ import annotations

from devstack.sandbox import Sandbox
from tests.support.harness import StartProxy
from tests.support.txmodel import model_config, run_model


def test_random_transactions_commit_exactly_what_the_model_says(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(model_config(sandbox.primary().port))
    report = run_model(proxy, sandbox.primary(), walkers=6, steps=150)
    print(report.summary())
    assert report.problems == []
    # The run reached the states it is about, not only the easy ones.
    steps = ("duplicate", "rollback_to", "savepoint", "kill_query", "disconnect", "commit", "twin", "ddl")
    for step in (*steps, "lock_tables", "locked_check", "lock_check", "temp_check"):
        assert report.counts[step] > 0, report.summary()
    assert report.counts["overstay ended by the proxy"] == 1, report.summary()
    assert report.counts["churn checks"] > 100, report.summary()

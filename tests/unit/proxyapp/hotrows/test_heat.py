"""Finding hot keys by itself (``proxyapp.hotrows.heat``) on a clock the test holds: marks on one column with a key
seen again lead to a proposal, applied with auto apply, withdrawn when the heat is gone; every decision logged."""

from __future__ import annotations

import logging

import pytest

from proxyapp.hotrows.heat import HeatMap, where_key
from proxyapp.hotrows.service import HotRowSettings


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def settings(auto_apply: bool = False, threshold: int = 5) -> HotRowSettings:
    chosen = HotRowSettings()
    chosen.auto_apply = auto_apply
    chosen.threshold = threshold
    chosen.cooldown_ms = 60_000
    return chosen


UPDATE = "UPDATE app.acct SET balance = balance - 1 WHERE id = {}"


def test_where_key_reads_the_table_and_the_first_column_compared_with_a_value() -> None:
    assert where_key("UPDATE acct SET b = 1 WHERE id = 7 AND b > 0", "app") == ("app", "acct", "id", "7")
    assert where_key("SELECT * FROM s.t WHERE x > 1 AND `K` = 'a' FOR UPDATE", "") == ("s", "t", "k", "a")
    assert where_key("DELETE FROM t WHERE a.id = 3", "app") == ("app", "t", "id", "3")
    assert where_key("UPDATE t SET b = 1 WHERE id IN (1, 2)", "app") is None
    assert where_key("UPDATE t SET b = 1", "app") is None


def test_marks_with_a_key_seen_again_propose_a_queue_and_the_cold_withdraw_it(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    heat = HeatMap(clock, lambda: 1_700_000_000.0, settings())
    caplog.set_level(logging.INFO, "proxyapp.hotrows.heat")
    for n in range(4):
        heat.observe(UPDATE.format(n % 2), "app", "0xA", "UPDATE acct ...", 1213 if n == 0 else 0)
    assert heat.proposals() == []  # 4 marks < 5
    heat.observe(UPDATE.format(1), "app", "0xB", "UPDATE acct +", 1205)
    (proposal,) = heat.proposals()
    assert proposal["id"] == "app.acct.id" and proposal["queue"] == "app.acct" and proposal["column"] == "id"
    assert proposal["keys"][0] == "1" and proposal["state"] == "proposed"
    assert proposal["evidence"] == {"deadlocks": 1, "lock_wait_timeouts": 1, "slow": 3, "marks_last_minute": 5}
    assert [d["digest"] for d in proposal["digests"]] == ["0xA", "0xB"]
    assert heat.applied == {}  # proposed only: a DBA accepts it
    assert "proposing queue app.acct on app.acct.id (keys 1, 0; 5 marks" in caplog.text
    clock.now += 59
    heat.sweep()
    assert len(heat.proposals()) == 1
    clock.now += 2
    heat.sweep()
    assert heat.proposals() == []
    assert "withdrew the proposal of queue app.acct on app.acct.id: no mark for 60000 ms" in caplog.text


def test_spread_marks_without_a_hot_key_propose_nothing() -> None:
    heat = HeatMap(FakeClock(), lambda: 0.0, settings())
    for n in range(20):
        heat.observe(UPDATE.format(n), "app", "0xA", "UPDATE acct ...", 0)
    assert heat.proposals() == []


def test_auto_apply_queues_the_digests_and_turning_it_off_stops() -> None:
    heat = HeatMap(FakeClock(), lambda: 0.0, settings(auto_apply=True, threshold=3))
    for _ in range(3):
        heat.observe(UPDATE.format(5), "app", "0xA", "UPDATE acct ...", 0)
    assert heat.applied == {"0xA": ("app.acct", "id")}
    assert heat.proposals()[0]["state"] == "applied"
    heat.observe(UPDATE.format(5), "app", "0xC", "UPDATE acct other", 0)
    assert set(heat.applied) == {"0xA", "0xC"}
    heat.configure(settings(auto_apply=False, threshold=3))
    assert heat.applied == {}
    assert heat.proposals()[0]["state"] == "proposed"


def test_marks_older_than_a_minute_do_not_count() -> None:
    clock = FakeClock()
    heat = HeatMap(clock, lambda: 0.0, settings(threshold=3))
    heat.observe(UPDATE.format(1), "app", "0xA", "t", 0)
    heat.observe(UPDATE.format(1), "app", "0xA", "t", 0)
    clock.now += 61
    heat.observe(UPDATE.format(1), "app", "0xA", "t", 0)
    assert heat.proposals() == []


def test_a_proposal_shows_a_keys_and_schemas_bytes_that_are_not_utf8_escaped(caplog: pytest.LogCaptureFixture) -> None:
    """Hot writes of ``... WHERE id = '\\xff'`` in schema ``db\\xfe`` (lone surrogates once decoded): the proposal's
    texts (its id, schema, key, digest text) and the log show them as ``\\xff``."""
    heat = HeatMap(FakeClock(), lambda: 0.0, settings(threshold=3))
    caplog.set_level(logging.INFO, "proxyapp.hotrows.heat")
    for _ in range(3):
        heat.observe("UPDATE acct SET b = 1 WHERE id = '\udcff'", "db\udcfe", "0xA", "UPDATE acct ... '\udcff'", 0)
    (proposal,) = heat.proposals()
    assert (proposal["id"], proposal["schema"], proposal["keys"]) == ("db\\xfe.acct.id", "db\\xfe", ["\\xff"])
    assert proposal["digest_text"] == proposal["digests"][0]["digest_text"] == "UPDATE acct ... '\\xff'"
    assert "proposing queue db_.acct on db\\xfe.acct.id (keys \\xff;" in caplog.text

"""XA statements as ProxyFleet writes them: xids that need no quoting, and worker prefixes that never overlap."""

from __future__ import annotations

import pytest

from proxyapp.sharding.decisions import PREFIX
from proxyapp.sharding.xa import XA_ERRORS, client_code, xa_start_sql, xid_prefix, xid_sql


def test_xa_start_names_the_gtrid_and_the_shard() -> None:
    assert xa_start_sql("pfab.0.17f.1", 3) == "XA START 'pfab.0.17f.1','3'"
    assert xid_sql("pfab.0.17f.1", "12") == "'pfab.0.17f.1','12'"


@pytest.mark.parametrize("gtrid", ["", "it's", "a b", "x\\", "é", "g" * 65])
def test_an_xid_that_would_need_quoting_is_refused(gtrid: str) -> None:
    with pytest.raises(ValueError):
        xid_sql(gtrid, 0)


def test_worker_prefixes_are_short_stable_and_none_starts_another() -> None:
    prefixes = [xid_prefix(node, worker) for node in ("node1", "node2", "n" * 63) for worker in range(12)]
    assert len(set(prefixes)) == len(prefixes)
    assert all(PREFIX.fullmatch(p) for p in prefixes)
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)  # worker 1 vs 10
    assert xid_prefix("node1", 0) == xid_prefix("node1", 0)


@pytest.mark.parametrize(
    ("code", "told"),
    [
        (1614, 1213),  # XA_RBDEADLOCK: the deadlock, as one server says it
        (1613, 1205),  # XA_RBTIMEOUT: the lock wait timeout
        (1399, 1180),  # XAER_RMFAIL: ER_ERROR_DURING_COMMIT
        (1400, 1180),  # XAER_OUTSIDE
        (1397, 1180),  # XAER_NOTA
        (1402, 1180),  # XA_RBROLLBACK
        (1062, 1062),  # a duplicate key on a shard: as it is
        (2013, 2013),
    ],
)
def test_a_client_is_never_told_an_xa_error(code: int, told: int) -> None:
    assert client_code(code) == told
    assert client_code(code) not in XA_ERRORS

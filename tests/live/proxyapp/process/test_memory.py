"""A worker gives back the memory a burst of large packets took (issue 42 item 5): its figures are in ``/stats``
(``memory``: each worker's resident size, peak, and what it returned) and ``/metrics``, and the housekeeping hands
the freed buffers back to the system, so a worker's resident size is no longer its high-water mark."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.sandbox import Sandbox

BIG = 8 << 20


def test_a_burst_of_large_packets_is_given_back(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start_proxy(small_pool_config(sandbox.primary().port, 8, **{"mysql-threads": "1"}))

    def memory() -> dict[str, int]:
        (worker,) = proxy.stats()["memory"]["workers"]
        return worker

    def burst(_: int) -> int:
        with proxy.connect(max_allowed_packet=64 << 20) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT LENGTH('{'x' * BIG}'), LENGTH(REPEAT('y', {BIG // 2}))")
            ((length, _),) = cur.fetchall()
            return int(length)

    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(burst, range(6))) == [BIG] * 6
    after_burst = memory()
    proxy.advance_clock(11)  # the housekeeping gives memory back every 10 s of the proxy's clock
    after = memory()
    assert after["trims"] > after_burst["trims"]  # (one may have run during a slow burst already)
    assert after["returned_bytes"] > 0
    assert after["rss_bytes"] < after["peak_rss_bytes"] - BIG  # no longer at the burst's high-water mark
    assert f'proxyfleet_worker_resident_bytes{{pid="{after["pid"]}"}}' in proxy.admin("GET", "/metrics")

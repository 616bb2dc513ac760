"""Every forwarding test runs twice: through the C relay (``proxyapp.forward._splice``, which must be built: the test
fails, never skips, without it) and through the Python relay (``PROXYFLEET_SPLICE=0``)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.proxy import ProxyProcess
from tests.live.proxyapp.forward.test_forwarding import StartProxy


@pytest.fixture(params=["c", "python"])
def relay(request: pytest.FixtureRequest) -> str:
    """Which relay the proxies of the test pass bytes through."""
    if request.param == "c":
        try:
            importlib.import_module("proxyapp.forward._splice")
        except ImportError as exc:
            pytest.fail(f"the C relay proxyapp.forward._splice is not built ({exc}): run `make build` first")
    return str(request.param)


@pytest.fixture
def start_proxy(relay: str, tmp_path: Path) -> Iterator[StartProxy]:
    """Start proxies using ``relay``; all are stopped at the end of the test."""
    started: list[ProxyProcess] = []

    def start(config: dict[str, Any]) -> ProxyProcess:
        workdir = tmp_path / f"proxy{len(started)}"
        workdir.mkdir()
        proxy = ProxyProcess(config, workdir)
        proxy.env["PROXYFLEET_SPLICE"] = "1" if relay == "c" else "0"
        started.append(proxy)
        return proxy.start()

    yield start
    for proxy in started:
        proxy.stop()

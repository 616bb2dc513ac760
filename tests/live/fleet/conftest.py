"""The one running fleet of the end-to-end tests (``running_fleet``), in the shape each module asks for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack import stack


@pytest.fixture(scope="module")
def fleet_shape() -> stack.FleetShape:
    """What the module's fleet is made of: each end-to-end module defines its own (this one stops a module that
    uses ``running_fleet`` without saying)."""
    raise pytest.UsageError("a module that uses running_fleet defines a fleet_shape fixture")


@pytest.fixture(scope="module")
def running_fleet(
    fleet_shape: stack.FleetShape, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.RunningFleet]:
    """Redis, the control plane and the nodes, running for the module's tests in the shape of its ``fleet_shape``.

    The modules need different shapes, so each gives its own: the browser tests one node reporting every second, the
    collected static files (the pages load htmx and Chart.js) and no beat; the push tests two nodes, one of which
    refuses hostgroup 30, and reconcile every second; the benchmark tests the bench worker and beat, no node; the
    failover tests two nodes and a worker of two processes (a switchover waits in one for the acks the other
    records). What they do with it once it runs (publish, turn failover on, wait for the nodes) stays theirs."""
    with stack.running_fleet(tmp_path_factory.mktemp("fleet"), fleet_shape) as fleet:
        yield fleet

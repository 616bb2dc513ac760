"""The sharding tests' second shard server: one independent MariaDB for the whole package (shard 0 is the session
sandbox's primary); each module's ``shards`` fixture makes the schemas it needs on both and drops them after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.sandbox import Sandbox
from tests.support.monitor_support import own_sandbox


@pytest.fixture(scope="package")
def other() -> Iterator[Sandbox]:
    """A second, independent server: shard 1."""
    with own_sandbox("shard1", replicas=0) as box:
        yield box

"""A test rig's proxy: started on entering the rig, stopped on leaving it (the sharding harnesses' base)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from devstack.proxy import ProxyProcess


class ProxyRig:
    """A proxy run from ``config()`` in ``workdir``, up while the rig is entered."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proxy: ProxyProcess | None = None

    def config(self) -> dict[str, Any]:
        """The proxy's config document."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proxy = ProxyProcess(self.config(), self.workdir).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proxy is not None:
            self.proxy.stop()

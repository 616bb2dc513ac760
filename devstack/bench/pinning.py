"""CPU pinning for the benchmarks: the proxy under test on CPUs of its own, the server and the load generator on the
others, so that neither steals the other's CPU at random and rounds vary less.

A layout gives the proxy (ProxyFleet or the peer it is measured against, in turn) the last ``proxy_cpus`` CPUs the
harness may use and everything else the rest. Pinning a running process means pinning every thread it has (a thread's
new threads inherit its CPUs), and its descendants (the proxy's worker processes) with it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class PinningError(ValueError):
    """The machine has too few CPUs for the layout asked for."""


@dataclass(frozen=True)
class Layout:
    """Which CPUs the proxy under test gets, and which the server and the load generator share."""

    proxy: frozenset[int]
    rest: frozenset[int]

    @classmethod
    def split(cls, proxy_cpus: int, available: set[int] | None = None) -> Layout:
        """The last ``proxy_cpus`` of the ``available`` CPUs (the harness's own by default) for the proxy."""
        cpus = sorted(available if available is not None else os.sched_getaffinity(0))
        if not 0 < proxy_cpus < len(cpus):
            raise PinningError(
                f"pinning gives the proxy {proxy_cpus} CPU(s) and the server and sysbench the rest, "
                f"but only {len(cpus)} CPU(s) are available"
            )
        return cls(frozenset(cpus[-proxy_cpus:]), frozenset(cpus[:-proxy_cpus]))

    def describe(self) -> str:
        """For the report: 'proxy on CPU 1; server and sysbench on CPU 0'."""
        return f"proxy on CPU {_cpu_list(self.proxy)}; server and sysbench on CPU {_cpu_list(self.rest)}"


def _cpu_list(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def pin_processes(pids: Iterable[int], cpus: frozenset[int]) -> None:
    """Pin every thread of the processes ``pids`` (a process and its descendants) to ``cpus``."""
    for process in pids:
        for task in _tasks(process):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(task, cpus)


def pinned_start(cpus: frozenset[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that starts a child on ``cpus`` (None: not pinned)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _tasks(pid: int) -> list[int]:
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []

"""An ordered mirror's lanes: one per client session and mirror hostgroup, running that session's units on the mirror
in its order, one connection at a time, as a small state machine (``LANE_MOVES``) that refuses every move it does
not know (``proxyapp.mirror.mirror`` runs the lanes)."""

from __future__ import annotations

from collections import deque

from proxyapp.mirror.units import MirrorUnit
from proxyapp.mysql.backend import BackendConnection

#: Seconds between a lane's attempts to reach an unavailable mirror (doubling from the first to the last).
BACKOFF_FIRST = 0.05
BACKOFF_LAST = 2.0

# A lane's states. IDLE: nothing to run, or its units wait for a push; READY: in line for a runner; RUNNING: a runner
# applies its units; WAITING: its last unit failed, it tries again after its backoff.
IDLE = 0
READY = 1
RUNNING = 2
WAITING = 3
LANE_STATES = ("IDLE", "READY", "RUNNING", "WAITING")
#: The moves a lane may make, by state: everything else is a bug, refused by ``Lane.move``.
LANE_MOVES: tuple[tuple[int, ...], ...] = (
    (READY,),  # IDLE: work was pushed
    (RUNNING,),  # READY: a runner took it
    (READY, IDLE, WAITING),  # RUNNING: more to do after its turn, done, or a unit failed
    (READY,),  # WAITING: its backoff ran out
)


class LaneStateError(Exception):
    """A lane was asked to make a move its state does not allow."""


class Lane:
    """One session's ordered mirror for one hostgroup: its units in order, in memory and then on disk."""

    __slots__ = (
        "backoff",
        "closed",
        "conn",
        "dirty",
        "disk_head_created",
        "disk_ops",
        "disk_units",
        "error",
        "hostgroup",
        "key",
        "last_loaded",
        "state",
        "units",
    )

    def __init__(self, key: str, hostgroup: int) -> None:
        self.key = key
        self.hostgroup = hostgroup
        self.units: deque[MirrorUnit] = deque()  # in memory, oldest first; older than those on disk
        self.disk_units = 0  # units of this lane on disk not read back yet
        self.disk_ops = 0
        self.disk_head_created = 0.0  # when the first of those was queued
        self.last_loaded = 0  # seq of the last unit read back from disk
        self.conn: BackendConnection | None = None
        self.dirty = False  # the connection holds state only this lane knows (temporary tables, locks...)
        self.closed = False  # its session is gone: the lane ends once its units ran
        self.state = IDLE
        self.backoff = BACKOFF_FIRST
        self.error = ""

    def move(self, to: int) -> None:
        """Move to state ``to``: the one way a lane's state changes; LaneStateError for a move ``LANE_MOVES``
        does not allow."""
        if to not in LANE_MOVES[self.state]:
            move = f"{LANE_STATES[self.state]} -> {LANE_STATES[to]}"
            raise LaneStateError(f"mirror lane {self.key}: {move} is not a move")
        self.state = to

    def has_work(self) -> bool:
        """Whether units wait, in memory or on disk."""
        return bool(self.units) or self.disk_units > 0

"""Talking to a replication hostgroup's MariaDB servers: reading their replication state and changing the topology
(fence, promote, repoint, rejoin) with the policy's admin account. Every connection has short timeouts, so a server
that is gone, or one that accepts connections and never answers, costs seconds, never a hang.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import pymysql

from fleet.failover import gtid
from fleet.failover.models import FailoverPolicy, parse_server

#: Seconds to connect (TCP and the handshake) and to wait for an ordinary statement.
CONNECT_TIMEOUT = 2
STATEMENT_TIMEOUT = 10


class ServerError(Exception):
    """A server could not be reached or refused a statement; the message names the server and the cause."""


@dataclass(frozen=True)
class Account:
    """A login to the servers."""

    user: str
    password: str

    @classmethod
    def admin(cls, policy: FailoverPolicy) -> Account:
        """The account topology changes run as."""
        return cls(policy.admin_user, policy.admin_password)

    @classmethod
    def replication(cls, policy: FailoverPolicy) -> Account | None:
        """The account replicas log in to their primary as (None when the policy has none)."""
        return cls(policy.replication_user, policy.replication_password) if policy.replication_user else None


def _error(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return f"{exc.args[1]} ({exc.args[0]})"
    return str(exc) or type(exc).__name__


class Server:
    """An open admin connection to one server; use as a context manager."""

    def __init__(self, name: str, account: Account, *, wait: float = 0, connect_timeout: float = CONNECT_TIMEOUT):
        """Connect to ``name`` (host:port); ``wait`` is the longest GTID wait a statement will do (added to the
        read timeout). ServerError when the server cannot be reached or refuses the login."""
        self.name = name
        host, port = parse_server(name)
        try:
            self.conn = pymysql.connect(
                host=host,
                port=port,
                user=account.user,
                password=account.password,
                autocommit=True,
                connect_timeout=connect_timeout,
                read_timeout=STATEMENT_TIMEOUT + wait,
                write_timeout=STATEMENT_TIMEOUT,
            )
        except (pymysql.err.MySQLError, OSError) as exc:
            raise ServerError(f"{name}: cannot connect: {_error(exc)}") from None

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (quietly: the server may be gone)."""
        with contextlib.suppress(pymysql.err.MySQLError, OSError):
            self.conn.close()

    def run(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement; its rows. ServerError naming the server and the statement."""
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        except (pymysql.err.MySQLError, OSError) as exc:
            shown = sql.split(" MASTER_PASSWORD")[0]  # never a password in a message
            raise ServerError(f"{self.name}: {shown}: {_error(exc)}") from None

    def value(self, sql: str, args: Any = None) -> Any:
        """The first column of the first row of ``sql``."""
        rows = self.run(sql, args)
        return rows[0][0] if rows else None

    def slave_status(self) -> dict[str, Any]:
        """SHOW SLAVE STATUS as a dict ({} when the server replicates from nobody)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone()
                return dict(zip([d[0] for d in cur.description], row, strict=True)) if row else {}
        except (pymysql.err.MySQLError, OSError) as exc:
            raise ServerError(f"{self.name}: SHOW SLAVE STATUS: {_error(exc)}") from None

    def state(self) -> ReplicationState:
        """The server's replication state."""
        row = self.run("SELECT @@read_only, @@gtid_binlog_pos, @@gtid_slave_pos, @@gtid_current_pos")[0]
        status = self.slave_status()
        master = f"{status['Master_Host']}:{status['Master_Port']}" if status.get("Master_Host") else None
        return ReplicationState(
            server=self.name,
            read_only=bool(int(row[0])),
            binlog_pos=gtid.parse(row[1]),
            slave_pos=gtid.parse(row[2]),
            current_pos=gtid.parse(row[3]),
            io_pos=gtid.parse(status.get("Gtid_IO_Pos")),
            master=master,
            io_running=status.get("Slave_IO_Running") or "",
            sql_running=status.get("Slave_SQL_Running") or "",
            last_error=status.get("Last_IO_Error") or status.get("Last_SQL_Error") or "",
            seconds_behind=status.get("Seconds_Behind_Master"),
        )

    def set_read_only(self, on: bool) -> None:
        """``SET GLOBAL read_only``."""
        self.run(f"SET GLOBAL read_only = {1 if on else 0}")

    def wait_for(self, position: gtid.Position, timeout: float) -> bool:
        """Wait up to ``timeout`` s until this replica has applied ``position`` (MASTER_GTID_WAIT); whether it did."""
        if not position:
            return True
        return self.value("SELECT MASTER_GTID_WAIT(%s, %s)", (gtid.render(position), timeout)) == 0

    def promote(self) -> gtid.Position:
        """Make this replica a primary: ``STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0``; its binlog
        position afterwards."""
        for statement in ("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0"):
            self.run(statement)
        return gtid.parse(self.value("SELECT @@gtid_binlog_pos"))

    def replicate_from(self, primary: str, account: Account | None, start_at: gtid.Position | None = None) -> None:
        """Replicate from ``primary`` with GTIDs: ``STOP SLAVE; CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos;
        START SLAVE``. ``account`` None keeps the login the replica has; ``start_at`` first sets
        ``gtid_slave_pos`` (for a server whose own transactions are in its binlog: an old primary)."""
        host, port = parse_server(primary)
        self.run("STOP SLAVE")
        if start_at is not None:
            self.run("SET GLOBAL gtid_slave_pos = %s", (gtid.render(start_at),))
        sql = "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USE_GTID = slave_pos"
        sql += ", MASTER_CONNECT_RETRY = 1"
        args: list[Any] = [host, port]
        if account is not None:
            sql += ", MASTER_USER = %s, MASTER_PASSWORD = %s"
            args += [account.user, account.password]
        self.run(sql, args)
        self.run("START SLAVE")

    def wait_replicating(self, position: gtid.Position, timeout: float) -> ReplicationState:
        """Wait up to ``timeout`` s until both replication threads run and this replica has applied ``position``
        (its primary's, read after pointing it there: a thread that runs a moment before the primary refuses the
        replica's position proves nothing), or a thread reports an error; the state (``caught_up(position)``)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if state.caught_up(position) or state.last_error or time.monotonic() >= deadline:
                return state
            time.sleep(0.1)

    def open_write_transactions(self) -> int:
        """How many transactions that changed data are open on the server (other than this connection's)."""
        return int(
            self.value(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                "WHERE trx_mysql_thread_id <> CONNECTION_ID() AND trx_rows_modified > 0"
            )
        )


@dataclass(frozen=True)
class ReplicationState:
    """What a server says of its replication."""

    server: str
    read_only: bool
    binlog_pos: dict[int, gtid.Gtid]
    slave_pos: dict[int, gtid.Gtid]
    current_pos: dict[int, gtid.Gtid]
    io_pos: dict[int, gtid.Gtid]
    master: str | None
    io_running: str
    sql_running: str
    last_error: str
    seconds_behind: int | None

    @property
    def replicating(self) -> bool:
        """Whether both replication threads run."""
        return self.io_running == "Yes" and self.sql_running == "Yes"

    def caught_up(self, position: gtid.Position) -> bool:
        """Whether both threads run and the server has applied ``position``."""
        return self.replicating and not gtid.missing(self.position, position)

    @property
    def position(self) -> dict[int, gtid.Gtid]:
        """Everything the server has applied: per domain, the later of ``@@gtid_slave_pos`` and
        ``@@gtid_current_pos`` (its binlog's own transactions included)."""
        return gtid.latest(self.slave_pos, self.current_pos, self.binlog_pos)

    @property
    def known(self) -> dict[int, gtid.Gtid]:
        """Everything the server has applied or received (``Gtid_IO_Pos``): what it holds once its relay log is
        applied."""
        return gtid.latest(self.position, self.io_pos)

    def threads(self) -> str:
        """The replication threads in words."""
        if self.master is None:
            return "replicates from nobody"
        error = f"; error: {self.last_error}" if self.last_error else ""
        return f"replicates from {self.master} (IO {self.io_running or 'No'}, SQL {self.sql_running or 'No'}{error})"

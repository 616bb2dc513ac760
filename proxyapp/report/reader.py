"""Reading a proxy's stats report back (the second seam, beside ``proxyapp.config``): what ``GET /stats`` answers
and what a node's agent sends the control plane, read section by section into typed rows. A malformed report is
refused with ``ReportError`` naming the bad path (``stats.connection_pool[3].srv_port: ...``); each section is read
on its own, so a bad section never hides the good ones.

Sections: ``global`` (counters), ``connection_pool`` (``PoolRow``), ``mirror`` (``MirrorCounts``), ``monitor``
(``MonitorRow``), ``server_transitions`` (``TransitionRow``), ``query_digest`` (``DigestRow``), ``pgsql_query_digest``
(``PgsqlDigestRow``), ``sharding_digest``
(``ShardingRow``), ``sharding_tables`` (``ShardTableRow``), ``query_rules`` (``RuleHits``), ``config``
(``ReportedConfig``), ``pgsql_forward`` (``PgsqlForward``: ``ForwardListenerRow`` and ``ForwardServerRow``) and
``pgsql`` (``PgsqlPooling``: the pooling proxy's listener, clients and ``PgsqlPoolRow``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from proxyapp.shown import shown

SERVER_STATUSES = ("ONLINE", "SHUNNED", "OFFLINE_SOFT", "OFFLINE_HARD")


class ReportError(ValueError):
    """A report that is not what a proxy sends; the message names the bad path."""


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A ``connection_pool`` row (stats_mysql_connection_pool), as far as the control plane reads it."""

    hostgroup: int
    srv_host: str
    srv_port: int
    status: str
    conn_used: int
    conn_free: int
    conn_ok: int
    conn_err: int
    queries: int
    latency_us: float

    @property
    def server(self) -> str:
        """``host:port``, as the control plane names a backend server."""
        return f"{self.srv_host}:{self.srv_port}"


@dataclass(frozen=True, slots=True)
class MirrorCounts:
    """A report's ``mirror`` section: statements mirrored, completed, failed by error code and dropped by reason,
    the queue and its parts, the sessions (lanes) of ordered hostgroups and their mode (hostgroup -> lossless or
    lossy). The fields after ``oldest_age_s`` are 0 or empty when a report leaves them out."""

    mirrored: int
    completed: int
    failed: dict[str, int]
    dropped: dict[str, int]
    queue_length: int
    queue_disk: int
    concurrency: int
    oldest_age_s: float
    retried: int
    max_concurrency: int
    queue_proxysql: int
    queue_memory: int
    memory_bytes: int
    memory_limit: int
    lanes: int
    lanes_waiting: int
    last_error: str
    ordered_hostgroups: dict[str, str]
    spill_path: str


@dataclass(frozen=True, slots=True)
class MonitorRow:
    """A ``monitor`` row: a server of a hostgroup, its status and its latest checks (None: not checked)."""

    hostgroup: int
    srv_host: str
    srv_port: int
    status: str
    connect_ok: bool | None
    ping_ok: bool | None
    read_only: bool | None
    lag_s: float | None
    last_error: str
    checked_at: datetime | None

    @property
    def server(self) -> str:
        """``host:port``, as the control plane names a backend server."""
        return f"{self.srv_host}:{self.srv_port}"


@dataclass(frozen=True, slots=True)
class TransitionRow:
    """A ``server_transitions`` row: a server's status change on the node and why."""

    at: datetime
    hostgroup: int
    srv_host: str
    srv_port: int
    from_status: str
    to_status: str
    reason: str


@dataclass(frozen=True, slots=True)
class DigestRow:
    """A ``query_digest`` row (stats_mysql_query_digest); times in microseconds, ``first_seen`` and ``last_seen`` in
    seconds since the epoch."""

    hostgroup: int
    schemaname: str
    username: str
    client_address: str
    digest: str
    digest_text: str
    count_star: int
    first_seen: int
    last_seen: int
    sum_time: int
    min_time: int
    max_time: int
    sum_rows_affected: int
    sum_rows_sent: int


@dataclass(frozen=True, slots=True)
class PgsqlDigestRow:
    """A ``pgsql_query_digest`` row (ProxySQL 3.0's stats_pgsql_query_digest): ``DigestRow``'s columns with the
    ``database`` the statements ran in for ``schemaname``."""

    hostgroup: int
    database: str
    username: str
    client_address: str
    digest: str
    digest_text: str
    count_star: int
    first_seen: int
    last_seen: int
    sum_time: int
    min_time: int
    max_time: int
    sum_rows_affected: int
    sum_rows_sent: int


@dataclass(frozen=True, slots=True)
class ShardingRow:
    """A ``sharding_digest`` row (``proxyapp.report.sharding``): how often a statement on sharded tables reached one
    shard, several (a scatter) or was refused, the shards it reached in all, and its merges' rows and microseconds;
    ``scatter_ratio`` is the share of the statements that ran that scattered."""

    schemaname: str
    digest: str
    digest_text: str
    single_shard: int
    scatter: int
    refused: int
    shards_reached: int
    merge_rows: int
    merge_us: int
    scatter_ratio: float

    @property
    def ran(self) -> int:
        """The statements that ran (on one shard or several)."""
        return self.single_shard + self.scatter

    @property
    def avg_shards(self) -> float:
        """The shards a statement that ran reached, on average (0 when none ran)."""
        return self.shards_reached / self.ran if self.ran else 0.0

    @property
    def avg_merge_us(self) -> float:
        """A scatter's merge time in microseconds, on average (0 without scatters)."""
        return self.merge_us / self.scatter if self.scatter else 0.0


@dataclass(frozen=True, slots=True)
class ShardTableRow:
    """A ``sharding_tables`` row (``proxyapp.sharding.tablerows``): a sharded table on one shard and the rows InnoDB
    estimates it has there (None: not known), asked at ``checked_at`` (None: not yet)."""

    schemaname: str
    tablename: str
    shard: int
    hostgroup: int
    rows_estimate: int | None
    checked_at: datetime | None


@dataclass(frozen=True, slots=True)
class RuleHits:
    """A ``query_rules`` row (stats_mysql_query_rules): how many queries a rule matched."""

    rule_id: int
    hits: int


@dataclass(frozen=True, slots=True)
class ReportedConfig:
    """The ``config`` section: the checksum of the config the node runs, when it loaded it and from where."""

    checksum: str
    loaded_at: datetime | None
    source: str


@dataclass(frozen=True, slots=True)
class ForwardListenerRow:
    """A ``pgsql_forward.listeners`` row: a forwarding listener's port, its state ("listening", or "error: " and
    why) and its connections and bytes since the proxy started (``connections_refused``: no server, or over
    ``max_connections``)."""

    port: int
    interface: str
    hostgroup_id: int
    state: str
    connections_active: int
    connections_total: int
    connections_refused: int
    bytes_from_clients: int
    bytes_to_clients: int


@dataclass(frozen=True, slots=True)
class ForwardServerRow:
    """A ``pgsql_forward.servers`` row: a PostgreSQL server of a hostgroup, its runtime status and why, and the
    forwarded connections and bytes it took (``bytes_sent`` to it, ``bytes_recv`` from it)."""

    hostgroup_id: int
    hostname: str
    port: int
    status: str
    status_reason: str
    connections_active: int
    connections_total: int
    connect_errors: int
    bytes_sent: int
    bytes_recv: int

    @property
    def server(self) -> str:
        """``host:port``, as the control plane names a backend server."""
        return f"{self.hostname}:{self.port}"


@dataclass(frozen=True, slots=True)
class PgsqlForward:
    """The ``pgsql_forward`` section: the node's forwarding listeners and the PostgreSQL servers behind them."""

    listeners: tuple[ForwardListenerRow, ...]
    servers: tuple[ForwardServerRow, ...]


@dataclass(frozen=True, slots=True)
class PgsqlPoolRow:
    """A ``pgsql.connection_pool`` row: a PostgreSQL server of a hostgroup, its runtime status and why, and the pooling
    proxy's connections to it (``conn_used`` lent to clients, ``conn_free`` idle, ``conn_ok`` and ``conn_err``
    connects that worked and failed, ``max_conn_used`` the most lent at once)."""

    hostgroup: int
    srv_host: str
    srv_port: int
    status: str
    status_reason: str
    conn_used: int
    conn_free: int
    conn_ok: int
    conn_err: int
    max_conn_used: int

    @property
    def server(self) -> str:
        """``host:port``, as the control plane names a backend server."""
        return f"{self.srv_host}:{self.srv_port}"


@dataclass(frozen=True, slots=True)
class PgsqlPooling:
    """The ``pgsql`` section: the pooling proxy's PostgreSQL listener (its ``pgsql-interfaces`` address and its state:
    "listening", "off" or "error: " and why), its clients (connected now, waiting for a server connection now, since
    the proxy started: in all, refused logins), the transactions and queries they ran, and its server pools."""

    listener_address: str
    listener_state: str
    clients_connected: int
    clients_total: int
    logins_failed: int
    transactions: int
    queries: int
    waiting_clients: int
    connection_pool: tuple[PgsqlPoolRow, ...]


_PGSQL_COUNTS = ("clients_connected", "clients_total", "logins_failed", "transactions", "queries", "waiting_clients")


_MIRROR_EXTRA_COUNTS = (
    "retried",
    "max_concurrency",
    "queue_proxysql",
    "queue_memory",
    "memory_bytes",
    "memory_limit",
    "lanes",
    "lanes_waiting",
)


def read_counters(stats: object) -> dict[str, int | float]:
    """The ``global`` counters."""
    section = _section(stats, "global")
    return {str(name): _number(section, name, "stats.global", negative=True) for name in section}


def read_pools(stats: object) -> list[PoolRow]:
    """The ``connection_pool`` rows."""
    rows = []
    for where, row in _rows(stats, "connection_pool"):
        rows.append(
            PoolRow(
                hostgroup=int(_number(row, "hostgroup", where)),
                srv_host=_text(row, "srv_host", where),
                srv_port=int(_number(row, "srv_port", where)),
                status=_text(row, "status", where),
                conn_used=int(_number(row, "ConnUsed", where)),
                conn_free=int(_number(row, "ConnFree", where)),
                conn_ok=int(_number(row, "ConnOK", where)),
                conn_err=int(_number(row, "ConnERR", where)),
                queries=int(_number(row, "Queries", where)),
                latency_us=float(_number(row, "Latency_us", where)),
            )
        )
    return rows


def read_mirror(stats: object) -> MirrorCounts | None:
    """The ``mirror`` section; None when the report has none (the node mirrors nothing)."""
    if _report(stats).get("mirror") is None:
        return None
    where = "stats.mirror"
    section = _section(stats, "mirror")
    counts = {}
    for key, by in (("failed", "error code"), ("dropped", "reason")):
        values = section.get(key)
        if not isinstance(values, Mapping):
            raise ReportError(f"{where}.{key}: expected an object of counts by {by}, not {values!r}")
        counts[key] = {str(name): int(_number(values, name, f"{where}.{key}")) for name in values}
    modes = section.get("ordered_hostgroups", {})
    if not isinstance(modes, Mapping) or not all(mode in ("lossless", "lossy") for mode in modes.values()):
        raise ReportError(f"{where}.ordered_hostgroups: expected an object of lossless or lossy, not {modes!r}")
    extra = {key: int(_number(section, key, where)) if key in section else 0 for key in _MIRROR_EXTRA_COUNTS}
    return MirrorCounts(
        mirrored=int(_number(section, "mirrored", where)),
        completed=int(_number(section, "completed", where)),
        failed=counts["failed"],
        dropped=counts["dropped"],
        queue_length=int(_number(section, "queue_length", where)),
        queue_disk=int(_number(section, "queue_disk", where)),
        concurrency=int(_number(section, "concurrency", where)),
        oldest_age_s=float(_number(section, "oldest_age_s", where)),
        **extra,
        last_error=_text(section, "last_error", where) if "last_error" in section else "",
        ordered_hostgroups={str(hostgroup): str(mode) for hostgroup, mode in modes.items()},
        spill_path=_text(section, "spill_path", where) if "spill_path" in section else "",
    )


def read_monitor(stats: object) -> list[MonitorRow] | None:
    """The ``monitor`` rows; None when the report has none (the node runs no monitor)."""
    if "monitor" not in _report(stats):
        return None
    rows = []
    for where, row in _rows(stats, "monitor"):
        status = _server_status(row, where)
        lag = _optional(row, "lag_s", (int, float), where)
        rows.append(
            MonitorRow(
                hostgroup=_integer(row, "hostgroup", where),
                srv_host=_text(row, "srv_host", where, empty=False),
                srv_port=_integer(row, "srv_port", where),
                status=status,
                connect_ok=_optional(row, "connect_ok", (bool,), where),
                ping_ok=_optional(row, "ping_ok", (bool,), where),
                read_only=_optional(row, "read_only", (bool,), where),
                lag_s=float(lag) if lag is not None else None,
                last_error=_optional(row, "last_error", (str,), where) or "",
                checked_at=read_moment(row.get("checked_at"), f"{where}.checked_at"),
            )
        )
    return rows


def read_transitions(stats: object) -> list[TransitionRow]:
    """The ``server_transitions`` rows (none when the report has none)."""
    rows = []
    for where, row in _rows(stats, "server_transitions", optional=True):
        at = read_moment(row.get("at"), f"{where}.at")
        if at is None:
            raise ReportError(f"{where}.at: missing")
        rows.append(
            TransitionRow(
                at=at,
                hostgroup=_integer(row, "hostgroup", where),
                srv_host=_text(row, "srv_host", where),
                srv_port=_integer(row, "srv_port", where),
                from_status=_text(row, "from", where),
                to_status=_text(row, "to", where),
                reason=_text(row, "reason", where) if "reason" in row else "",
            )
        )
    return rows


def read_digests(stats: object) -> list[DigestRow]:
    """The ``query_digest`` rows (none when the report has none)."""
    return [
        DigestRow(**_digest_columns(row, where, "schemaname"))
        for where, row in _rows(stats, "query_digest", optional=True)
    ]


def read_pgsql_digests(stats: object) -> list[PgsqlDigestRow]:
    """The ``pgsql_query_digest`` rows (none when the report has none: the node serves no PostgreSQL clients, or
    predates PostgreSQL digests)."""
    return [
        PgsqlDigestRow(**_digest_columns(row, where, "database"))
        for where, row in _rows(stats, "pgsql_query_digest", optional=True)
    ]


#: A digest row's figures, after its key and text.
_DIGEST_FIGURES = (
    "count_star",
    "first_seen",
    "last_seen",
    "sum_time",
    "min_time",
    "max_time",
    "sum_rows_affected",
    "sum_rows_sent",
)


def _digest_columns(row: Mapping[str, Any], where: str, schema_column: str) -> dict[str, Any]:
    """A digest row's columns read (``schema_column``: ``schemaname`` or ``database``)."""
    hostgroup = row.get("hostgroup")
    if isinstance(hostgroup, bool) or not isinstance(hostgroup, int):
        raise ReportError(f"{where}.hostgroup: expected a whole number, not {hostgroup!r}")
    columns: dict[str, Any] = {"hostgroup": hostgroup}
    for name in (schema_column, "username", "client_address", "digest", "digest_text"):
        columns[name] = _text(row, name, where)
    for name in _DIGEST_FIGURES:
        columns[name] = _integer(row, name, where)
    return columns


def read_sharding(stats: object) -> list[ShardingRow]:
    """The ``sharding_digest`` rows (none when the report has none: the node shards nothing, or predates sharding)."""
    rows = []
    for where, row in _rows(stats, "sharding_digest", optional=True):
        ratio = _number(row, "scatter_ratio", where)
        if ratio > 1:
            raise ReportError(f"{where}.scatter_ratio: expected a number from 0 to 1, not {ratio!r}")
        rows.append(
            ShardingRow(
                schemaname=_text(row, "schemaname", where),
                digest=_text(row, "digest", where),
                digest_text=_text(row, "digest_text", where),
                single_shard=_integer(row, "single_shard", where),
                scatter=_integer(row, "scatter", where),
                refused=_integer(row, "refused", where),
                shards_reached=_integer(row, "shards_reached", where),
                merge_rows=_integer(row, "merge_rows", where),
                merge_us=_integer(row, "merge_us", where),
                scatter_ratio=float(ratio),
            )
        )
    return rows


def read_sharding_tables(stats: object) -> list[ShardTableRow]:
    """The ``sharding_tables`` rows (none when the report has none: the node shards nothing, or predates them)."""
    rows = []
    for where, row in _rows(stats, "sharding_tables", optional=True):
        estimate = _optional(row, "rows_estimate", (int,), where)
        if estimate is not None and estimate < 0:
            raise ReportError(f"{where}.rows_estimate: expected a whole number of 0 or more or null, not {estimate!r}")
        rows.append(
            ShardTableRow(
                schemaname=_text(row, "schemaname", where, empty=False),
                tablename=_text(row, "tablename", where, empty=False),
                shard=_integer(row, "shard", where),
                hostgroup=_integer(row, "hostgroup", where),
                rows_estimate=estimate,
                checked_at=read_moment(row.get("checked_at"), f"{where}.checked_at"),
            )
        )
    return rows


def read_rule_hits(stats: object) -> list[RuleHits]:
    """The ``query_rules`` rows (none when the report has none)."""
    return [
        RuleHits(rule_id=_integer(row, "rule_id", where), hits=_integer(row, "hits", where))
        for where, row in _rows(stats, "query_rules", optional=True)
    ]


def read_config(stats: object) -> ReportedConfig | None:
    """The ``config`` section; None when the report has none."""
    if _report(stats).get("config") is None:
        return None
    where = "stats.config"
    section = _section(stats, "config")
    return ReportedConfig(
        checksum=_text(section, "checksum", where),
        loaded_at=read_moment(section.get("loaded_at"), f"{where}.loaded_at"),
        source=_text(section, "source", where) if "source" in section else "",
    )


def read_pgsql_forward(stats: object) -> PgsqlForward | None:
    """The ``pgsql_forward`` section; None when the report has none (a proxy from before PostgreSQL forwarding)."""
    if _report(stats).get("pgsql_forward") is None:
        return None
    where = "stats.pgsql_forward"
    section = _section(stats, "pgsql_forward")
    listeners = []
    for at, row in _list_rows(section.get("listeners"), f"{where}.listeners"):
        listeners.append(
            ForwardListenerRow(
                port=_integer(row, "port", at),
                interface=_text(row, "interface", at, empty=False),
                hostgroup_id=_integer(row, "hostgroup_id", at),
                state=_text(row, "state", at, empty=False),
                connections_active=_integer(row, "connections_active", at),
                connections_total=_integer(row, "connections_total", at),
                connections_refused=_integer(row, "connections_refused", at),
                bytes_from_clients=_integer(row, "bytes_from_clients", at),
                bytes_to_clients=_integer(row, "bytes_to_clients", at),
            )
        )
    servers = []
    for at, row in _list_rows(section.get("servers"), f"{where}.servers"):
        status = _server_status(row, at)
        servers.append(
            ForwardServerRow(
                hostgroup_id=_integer(row, "hostgroup_id", at),
                hostname=_text(row, "hostname", at, empty=False),
                port=_integer(row, "port", at),
                status=status,
                status_reason=_text(row, "status_reason", at) if "status_reason" in row else "",
                connections_active=_integer(row, "connections_active", at),
                connections_total=_integer(row, "connections_total", at),
                connect_errors=_integer(row, "connect_errors", at),
                bytes_sent=_integer(row, "bytes_sent", at),
                bytes_recv=_integer(row, "bytes_recv", at),
            )
        )
    return PgsqlForward(tuple(listeners), tuple(servers))


def read_pgsql(stats: object) -> PgsqlPooling | None:
    """The ``pgsql`` section; None when the report has none (a proxy from before PostgreSQL pooling)."""
    if _report(stats).get("pgsql") is None:
        return None
    where = "stats.pgsql"
    section = _section(stats, "pgsql")
    listener = section.get("listener")
    if not isinstance(listener, Mapping):
        raise ReportError(f"{where}.listener: expected an object, not {listener!r}")
    address = _text(listener, "address", f"{where}.listener")
    state = _text(listener, "state", f"{where}.listener")
    if state not in ("listening", "off") and not state.startswith("error: "):
        raise ReportError(f"{where}.listener.state: expected listening, off or 'error: ' and why, not {state!r}")
    pool = []
    for at, row in _list_rows(section.get("connection_pool"), f"{where}.connection_pool"):
        status = _server_status(row, at)
        pool.append(
            PgsqlPoolRow(
                hostgroup=_integer(row, "hostgroup", at),
                srv_host=_text(row, "srv_host", at, empty=False),
                srv_port=_integer(row, "srv_port", at),
                status=status,
                status_reason=_text(row, "status_reason", at) if "status_reason" in row else "",
                conn_used=_integer(row, "ConnUsed", at),
                conn_free=_integer(row, "ConnFree", at),
                conn_ok=_integer(row, "ConnOK", at),
                conn_err=_integer(row, "ConnERR", at),
                max_conn_used=_integer(row, "MaxConnUsed", at),
            )
        )
    counts = {name: _integer(section, name, where) for name in _PGSQL_COUNTS}
    return PgsqlPooling(
        listener_address=address,
        listener_state=state,
        **counts,
        connection_pool=tuple(pool),
    )


def read_moment(value: object, where: str) -> datetime | None:
    """A report's time: ISO 8601 with its offset, or seconds since the epoch; None when missing."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    raise ReportError(f"{where}: expected an ISO 8601 time or seconds since the epoch, not {value!r}")


def _report(stats: object) -> Mapping[str, Any]:
    """``stats`` itself, refused unless an object."""
    if not isinstance(stats, Mapping):
        raise ReportError(f"stats: expected an object, not {type(stats).__name__}")
    return stats


def _section(stats: object, key: str) -> Mapping[str, Any]:
    """``stats[key]``, refused unless an object."""
    value = _report(stats).get(key)
    if not isinstance(value, Mapping):
        raise ReportError(f"stats.{key}: expected an object, not {value!r}")
    return value


def _rows(stats: object, key: str, optional: bool = False) -> list[tuple[str, Mapping[str, Any]]]:
    """The rows of the list ``stats[key]`` with their paths, each refused unless an object; none when ``optional``
    and the report has no ``key``."""
    if optional and key not in _report(stats):
        return []
    return _list_rows(_report(stats).get(key), f"stats.{key}")


def _list_rows(value: object, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The rows of the list ``value`` found at ``where``, with their paths, each refused unless an object."""
    if not isinstance(value, list):
        raise ReportError(f"{where}: expected a list of rows, not {value!r}")
    rows = []
    for index, row in enumerate(value):
        if not isinstance(row, Mapping):
            raise ReportError(f"{where}[{index}]: expected an object, not {row!r}")
        rows.append((f"{where}[{index}]", row))
    return rows


def _number(row: Mapping[str, Any], key: str, where: str, negative: bool = False) -> int | float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or (value < 0 and not negative):
        raise ReportError(f"{where}.{key}: expected a number{'' if negative else ' of 0 or more'}, not {value!r}")
    return value


def _integer(row: Mapping[str, Any], key: str, where: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(f"{where}.{key}: expected a whole number of 0 or more, not {value!r}")
    return value


def _text(row: Mapping[str, Any], key: str, where: str, empty: bool = True) -> str:
    """A text of a row, as it may be shown (``shown``: a query's bytes that are not UTF-8, which a report from an
    older node holds as lone surrogates, come out as ``\\xff``)."""
    value = row.get(key)
    if not isinstance(value, str) or (not empty and not value):
        raise ReportError(f"{where}.{key}: expected text, not {value!r}")
    return shown(value)


def _optional(row: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = row.get(key)
    if value is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))):
        names = " or ".join(k.__name__ for k in kinds)
        raise ReportError(f"{where}.{key}: expected {names} or null, not {value!r}")
    return value


def _server_status(row: Mapping[str, Any], where: str) -> str:
    """A row's ``status``: one of ``SERVER_STATUSES``."""
    status = row.get("status")
    if status not in SERVER_STATUSES:
        raise ReportError(f"{where}.status: expected one of {', '.join(SERVER_STATUSES)}, not {status!r}")
    return str(status)

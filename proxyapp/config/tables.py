"""The config document's tables: one frozen dataclass per ProxySQL table, one field per column.

Field names are ProxySQL's column names (mixed case included, e.g. ``flagIN``, ``OK_msg``) and defaults are
ProxySQL's. Each field's ``metadata`` holds the column's check (range or choices), which the config parser and
the control plane's forms both enforce: this module is the single definition of what a valid row is. An integer
column declared without a maximum is one of ProxySQL's INT columns, which it keeps in a C int: at most ``INT_MAX``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxyapp.config.sharding import ALGORITHMS as SHARD_ALGORITHMS

SERVER_STATUSES = ("ONLINE", "SHUNNED", "OFFLINE_SOFT", "OFFLINE_HARD")
CHECK_TYPES = (
    "read_only",
    "innodb_read_only",
    "super_read_only",
    "read_only|innodb_read_only",
    "read_only&innodb_read_only",
)
RE_MODIFIERS = ("CASELESS", "GLOBAL")
UINT32_MAX = 2**32 - 1
#: The largest value of ProxySQL's INT columns (a C int), the maximum of an integer column declared without one.
INT_MAX = 2**31 - 1


def column(
    default: Any = None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    choices: tuple[Any, ...] | None = None,
    required: bool = False,
    regex: bool = False,
    blank: bool = True,
    help: str = "",
) -> Any:
    """Declare a table column: its default and the check a value must pass (``blank=False``: a text that may not
    be empty or only spaces)."""
    meta = {
        "minimum": minimum,
        "maximum": maximum,
        "choices": choices,
        "required": required,
        "regex": regex,
        "blank": blank,
        "help": help,
    }
    if required:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class MysqlServer:
    """A backend server in a hostgroup (``mysql_servers``; key hostgroup_id, hostname, port)."""

    hostname: str = column(required=True, help="backend host name or address")
    hostgroup_id: int = column(0, minimum=0)
    port: int = column(3306, minimum=0, maximum=65535)
    gtid_port: int = column(0, minimum=0, maximum=65535)
    status: str = column("ONLINE", choices=SERVER_STATUSES)
    weight: int = column(1, minimum=0, maximum=10_000_000)
    compression: bool = column(False)
    max_connections: int = column(1000, minimum=0)
    max_replication_lag: int = column(0, minimum=0, maximum=126_144_000)
    use_ssl: bool = column(False, help="reach the server over TLS only (mysql-ssl_p2s_* variables)")
    max_latency_ms: int = column(0, minimum=0, maximum=UINT32_MAX)
    comment: str = column("")

    @property
    def key(self) -> tuple[int, str, int]:
        """The row's primary key."""
        return (self.hostgroup_id, self.hostname, self.port)

    @property
    def address(self) -> tuple[str, int]:
        """Where the server listens; the same address may serve several hostgroups."""
        return (self.hostname, self.port)


@dataclass(frozen=True, slots=True)
class MysqlUser:
    """A user clients log in as and the proxy reaches backends as (``mysql_users``)."""

    username: str = column(required=True, blank=False)
    password: str = column("", help="clear text, or a mysql_native_password hash '*HEX'")
    active: bool = column(True)
    use_ssl: bool = column(False, help="the client must log in over TLS (mysql-have_ssl)")
    default_hostgroup: int = column(0, minimum=0)
    default_schema: str | None = column(None)
    schema_locked: bool = column(False)
    transaction_persistent: bool = column(True)
    fast_forward: bool = column(False)
    backend: bool = column(True)
    frontend: bool = column(True)
    max_connections: int = column(10000, minimum=0)
    attributes: str = column("")
    comment: str = column("")


@dataclass(frozen=True, slots=True)
class MysqlQueryRule:
    """A query rule (``mysql_query_rules``), evaluated in ``rule_id`` order within its ``flagIN`` chain."""

    rule_id: int = column(required=True, minimum=1)
    active: bool = column(False)
    username: str | None = column(None)
    schemaname: str | None = column(None)
    flagIN: int = column(0, minimum=0)
    client_addr: str | None = column(None)
    proxy_addr: str | None = column(None)
    proxy_port: int | None = column(None, minimum=0, maximum=65535)
    digest: str | None = column(None, help="exact digest, '0x' and 16 hex digits")
    match_digest: str | None = column(None, regex=True)
    match_pattern: str | None = column(None, regex=True)
    negate_match_pattern: bool = column(False)
    re_modifiers: str = column("CASELESS", help="comma-separated: CASELESS, GLOBAL")
    flagOUT: int | None = column(None, minimum=0)
    replace_pattern: str | None = column(None)
    destination_hostgroup: int | None = column(None, minimum=0)
    cache_ttl: int | None = column(None, minimum=1, help="milliseconds")
    cache_empty_result: bool | None = column(None)
    cache_timeout: int | None = column(None, minimum=0)
    reconnect: bool | None = column(None)
    timeout: int | None = column(None, minimum=0, maximum=UINT32_MAX, help="milliseconds")
    retries: int | None = column(None, minimum=0, maximum=1000)
    delay: int | None = column(None, minimum=0, maximum=UINT32_MAX, help="milliseconds")
    next_query_flagIN: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    mirror_flagOUT: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    mirror_hostgroup: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    error_msg: str | None = column(None)
    OK_msg: str | None = column(None)
    sticky_conn: bool | None = column(None)
    multiplex: int | None = column(None, choices=(0, 1, 2))
    gtid_from_hostgroup: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    log: bool | None = column(None)
    apply: bool = column(False)
    attributes: str = column("")
    comment: str | None = column(None)
    trx_queue: str | None = column(
        None, help="ProxyFleet's hot-row queue a matching statement's transaction waits in (docs/hot-rows.md)"
    )
    trx_queue_key: str | None = column(
        None,
        help="the queue's key: \\1..\\9, a group of match_pattern, or a column the WHERE clause compares with a value",
    )


@dataclass(frozen=True, slots=True, kw_only=True)  # ProxySQL's column order puts a required column after flagIN
class MysqlQueryRuleFastRouting:
    """A fast routing row (``mysql_query_rules_fast_routing``): a query of this user on this schema whose rule chain
    ended without an ``apply=1`` rule at this flagIN goes to ``destination_hostgroup`` (one hash lookup)."""

    username: str = column(required=True, blank=False)
    schemaname: str = column(required=True)
    flagIN: int = column(0, minimum=0)
    destination_hostgroup: int = column(required=True, minimum=0)
    comment: str = column("")


@dataclass(frozen=True, slots=True)
class MysqlReplicationHostgroup:
    """A writer/reader hostgroup pair driven by the servers' ``read_only`` (``mysql_replication_hostgroups``)."""

    writer_hostgroup: int = column(required=True, minimum=0)
    reader_hostgroup: int = column(required=True, minimum=0)
    check_type: str = column("read_only", choices=CHECK_TYPES)
    comment: str = column("")


@dataclass(frozen=True, slots=True)
class GlobalVariable:
    """One ``global_variables`` row; the name must be a known variable and the value must fit its type."""

    variable_name: str = column(required=True)
    variable_value: str = column(required=True)


@dataclass(frozen=True, slots=True)
class MysqlShard:
    """One shard of a shard group (``mysql_shards``, ProxyFleet's own; key shard_group, shard): the hostgroup that
    serves it, so that read/write split, pooling, the monitor and failover work per shard unchanged."""

    shard_group: str = column(required=True, help="the group's name, which mysql_sharded_tables rows name")
    shard: int = column(required=True, minimum=0, maximum=4095, help="its number in the group: 0 to N-1")
    hostgroup_id: int = column(required=True, minimum=0)
    physical_schema: str | None = column(
        None, help="the schema that holds the tables on this shard (default: the same)"
    )
    comment: str = column("")


@dataclass(frozen=True, slots=True)
class MysqlShardedTable:
    """A table spread over a shard group (``mysql_sharded_tables``, ProxyFleet's own; key schemaname, tablename):
    which column's value picks the shard and by which algorithm (``proxyapp.config.sharding``); ``global``: the
    table is whole on every shard. ``sequence_column``: the column an INSERT leaves out (or gives NULL or 0) gets
    its value from a sequence unique across the shards (``proxyapp.sharding.sequence``)."""

    schemaname: str = column(required=True, help="the schema clients use")
    tablename: str = column(required=True)
    shard_group: str = column(required=True)
    algorithm: str = column("hash", choices=SHARD_ALGORITHMS)
    shard_key: str | None = column(None, help="the column whose value picks the shard (none for a global table)")
    parameters: str = column("", help="the algorithm's parameters, a JSON object (docs/sharding.md)")
    sequence_column: str | None = column(
        None, help="the AUTO_INCREMENT column the proxy numbers from the group's sequence (often the shard key)"
    )
    comment: str = column("")


@dataclass(frozen=True, slots=True)
class PgsqlServer:
    """A PostgreSQL server in a hostgroup (``pgsql_servers``, ProxySQL 3.0's columns; key hostgroup_id, hostname,
    port). PostgreSQL hostgroups are numbered apart from MySQL's, as in ProxySQL."""

    hostname: str = column(required=True, help="backend host name or address")
    hostgroup_id: int = column(0, minimum=0)
    port: int = column(5432, minimum=0, maximum=65535)
    status: str = column("ONLINE", choices=SERVER_STATUSES)
    weight: int = column(1, minimum=0, maximum=10_000_000)
    compression: bool = column(False)
    max_connections: int = column(1000, minimum=0)
    max_replication_lag: int = column(0, minimum=0, maximum=126_144_000)
    use_ssl: bool = column(False)
    max_latency_ms: int = column(0, minimum=0, maximum=UINT32_MAX)
    comment: str = column("")

    @property
    def key(self) -> tuple[int, str, int]:
        """The row's primary key."""
        return (self.hostgroup_id, self.hostname, self.port)

    @property
    def address(self) -> tuple[str, int]:
        """Where the server listens."""
        return (self.hostname, self.port)


@dataclass(frozen=True, slots=True)
class PgsqlQueryRule:
    """A PostgreSQL query rule (``pgsql_query_rules``, ProxySQL 3.0's columns: mysql_query_rules' with ``database``
    for ``schemaname``), evaluated by the same rule engine. The pooling proxy acts on the filters, the flag chain,
    ``destination_hostgroup``, ``replace_pattern``, ``error_msg``, ``cache_ttl``, ``cache_empty_result`` and
    ``timeout``; the other outputs draw a config warning."""

    rule_id: int = column(required=True, minimum=1)
    active: bool = column(False)
    username: str | None = column(None)
    database: str | None = column(None)
    flagIN: int = column(0, minimum=0)
    client_addr: str | None = column(None)
    proxy_addr: str | None = column(None)
    proxy_port: int | None = column(None, minimum=0, maximum=65535)
    digest: str | None = column(None, help="exact digest, '0x' and 16 hex digits")
    match_digest: str | None = column(None, regex=True)
    match_pattern: str | None = column(None, regex=True)
    negate_match_pattern: bool = column(False)
    re_modifiers: str = column("CASELESS", help="comma-separated: CASELESS, GLOBAL")
    flagOUT: int | None = column(None, minimum=0)
    replace_pattern: str | None = column(None)
    destination_hostgroup: int | None = column(None, minimum=0)
    cache_ttl: int | None = column(None, minimum=1, help="milliseconds")
    cache_empty_result: bool | None = column(None)
    cache_timeout: int | None = column(None, minimum=0)
    reconnect: bool | None = column(None)
    timeout: int | None = column(None, minimum=0, maximum=UINT32_MAX, help="milliseconds")
    retries: int | None = column(None, minimum=0, maximum=1000)
    delay: int | None = column(None, minimum=0, maximum=UINT32_MAX, help="milliseconds")
    next_query_flagIN: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    mirror_flagOUT: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    mirror_hostgroup: int | None = column(None, minimum=0, maximum=UINT32_MAX)
    error_msg: str | None = column(None)
    OK_msg: str | None = column(None)
    sticky_conn: bool | None = column(None)
    multiplex: int | None = column(None, choices=(0, 1, 2))
    log: bool | None = column(None)
    apply: bool = column(False)
    attributes: str = column("")
    comment: str | None = column(None)


@dataclass(frozen=True, slots=True)
class PgsqlReplicationHostgroup:
    """A writer/reader pair of PostgreSQL hostgroups (``pgsql_replication_hostgroups``): the monitor puts the server
    that is not in recovery (``pg_is_in_recovery()`` false) in the writer hostgroup, the replicas in the reader one."""

    writer_hostgroup: int = column(required=True, minimum=0)
    reader_hostgroup: int = column(required=True, minimum=0)
    check_type: str = column("read_only", choices=("read_only",), help="read_only: pg_is_in_recovery()")
    comment: str = column("")


POOL_MODES = ("transaction", "session")


@dataclass(frozen=True, slots=True)
class PgsqlUser:
    """A user PostgreSQL clients log in as and the proxy reaches servers as (``pgsql_users``, ProxySQL 3.0's columns
    and ProxyFleet's ``pool_mode``)."""

    username: str = column(required=True, blank=False)
    password: str = column(
        "",
        help="clear text, or the servers' own SCRAM-SHA-256 verifier or md5 hash (pg_authid.rolpassword): clients "
        "log in with their password, and the proxy reaches the servers with what their login proves",
    )
    active: bool = column(True)
    use_ssl: bool = column(False, help="the client must log in over TLS")
    default_hostgroup: int = column(0, minimum=0, help="the pgsql_servers hostgroup its queries go to")
    transaction_persistent: bool = column(True)
    fast_forward: bool = column(False)
    backend: bool = column(True)
    frontend: bool = column(True)
    max_connections: int = column(10000, minimum=0, help="its clients at once on the node")
    pool_mode: str = column(
        "transaction",
        choices=POOL_MODES,
        help="transaction: a server connection per transaction (PgBouncer's transaction pooling); session: one per "
        "client session",
    )
    attributes: str = column("")
    comment: str = column("")


@dataclass(frozen=True, slots=True, kw_only=True)
class PgsqlForwardListener:
    """A port that forwards raw TCP to a hostgroup of PostgreSQL servers (``pgsql_forward_listeners``, ProxyFleet's
    own, after oneproxy-monitor): each connection goes whole to one ONLINE server, chosen by weight; the proxy reads
    nothing of what passes, it only counts it."""

    port: int = column(required=True, minimum=1, maximum=65535, help="the port clients connect to")
    interface: str = column("127.0.0.1", help="the address to listen on (0.0.0.0 or :: for every interface)")
    hostgroup_id: int = column(required=True, minimum=0, help="the pgsql_servers hostgroup connections go to")
    active: bool = column(True)
    max_connections: int = column(
        10000, minimum=1, help="clients at once on this port (each of the node's worker processes takes its share)"
    )
    comment: str = column("")


#: Table name in the config document -> row class, in the document's order.
TABLES: dict[str, type] = {
    "mysql_servers": MysqlServer,
    "mysql_users": MysqlUser,
    "mysql_query_rules": MysqlQueryRule,
    "mysql_query_rules_fast_routing": MysqlQueryRuleFastRouting,
    "mysql_replication_hostgroups": MysqlReplicationHostgroup,
    "mysql_shards": MysqlShard,
    "mysql_sharded_tables": MysqlShardedTable,
    "pgsql_servers": PgsqlServer,
    "pgsql_users": PgsqlUser,
    "pgsql_query_rules": PgsqlQueryRule,
    "pgsql_replication_hostgroups": PgsqlReplicationHostgroup,
    "pgsql_forward_listeners": PgsqlForwardListener,
    "global_variables": GlobalVariable,
}

"""The ``global_variables`` registry: every known variable's type, default and range, and typed access to them.

Names are written as ProxySQL writes them (``mysql-connect_timeout_server``, ``admin-restapi_port``) and
defaults are ProxySQL 2.7's unless a variable's help says that ProxyFleet differs on purpose. The value checks
and message helpers here (``parse_int``, ``check_range``, ``show_value``, ``did_you_mean``) are shared with the
config parser, so a variable and a table column are judged and reported alike.

Why one file of this size: most of it is the registry itself, a table of ProxySQL's variables one entry each;
splitting it would split a table.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from proxyapp.config.tables import GlobalVariable

#: A variable's value once parsed.
Value = int | bool | str

_DECIMAL = re.compile(r"-?[0-9]+")
_TRUE_TEXTS = ("true", "1")
_FALSE_TEXTS = ("false", "0")
_DAY_MS: Final = 24 * 3600 * 1000
#: A query timeout this long (a day, in ms) means none: the default of mysql- and pgsql-default_query_timeout. A
#: constant mypy can fold, so that compiled modules have its value, not a lookup in this interpreted module.
NO_TIMEOUT_MS: Final = _DAY_MS


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A ``"; did you mean 'x'?"`` hint naming the candidate closest to ``word`` (empty when none is close)."""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def show_value(value: object) -> str:
    """A value as a message shows it: JSON's spelling for booleans and null, ``repr`` for the rest."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


@dataclass(frozen=True, slots=True)
class VariableSpec:
    """One known global variable: its type (``int``, ``bool`` or ``str``), default, allowed values and help."""

    name: str
    type: type
    default: Value
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[Value, ...] | None = None
    help: str = ""
    #: A further check of a parsed value (a text variable's grammar): raises ValueError saying what is wrong.
    check: Callable[[Value], object] | None = None

    def parse(self, raw: object) -> Value:
        """The typed value of ``raw`` (a JSON scalar or its text); ValueError says why it does not fit."""
        if self.type is bool:
            value: Value = _parse_bool(raw)
        elif self.type is int:
            value = parse_int(raw)
        elif isinstance(raw, str):
            value = raw
        else:
            raise ValueError(f"expected a string, got {show_value(raw)}")
        check_range(value, self.minimum, self.maximum, self.choices)
        if self.check is not None:
            self.check(value)
        return value

    def format(self, value: Value) -> str:
        """The text ProxySQL shows for ``value`` in ``global_variables`` (booleans as 'true'/'false')."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


def _parse_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.lower() in _TRUE_TEXTS + _FALSE_TEXTS:
        return raw.lower() in _TRUE_TEXTS
    raise ValueError(f"expected a boolean (true, false, 1 or 0), got {show_value(raw)}")


def parse_int(raw: object) -> int:
    """An integer given as an int, a float without fraction or a decimal string; ValueError otherwise."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and _DECIMAL.fullmatch(raw):
        try:
            return int(raw)
        except ValueError:  # more digits than Python converts
            raise ValueError(f"{raw[:20]}... is far too large") from None
    raise ValueError(f"expected an integer, got {show_value(raw)}")


def check_range(
    value: Any,
    minimum: int | None = None,
    maximum: int | None = None,
    choices: tuple[object, ...] | None = None,
) -> None:
    """Raise ValueError unless ``value`` is within ``minimum``..``maximum`` and among ``choices`` (None: any)."""
    if minimum is not None and value < minimum:
        raise ValueError(f"{show_value(value)} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{show_value(value)} is above the maximum {maximum}")
    if choices is not None and value not in choices:
        allowed = ", ".join(show_value(choice) for choice in choices)
        raise ValueError(f"{show_value(value)} is not one of {allowed}")


def _int(name: str, default: int, help: str, minimum: int | None = 0, maximum: int | None = None) -> VariableSpec:
    return VariableSpec(name, int, default, minimum=minimum, maximum=maximum, help=help)


def _bool(name: str, default: bool, help: str) -> VariableSpec:
    return VariableSpec(name, bool, default, help=help)


def _str(
    name: str,
    default: str,
    help: str,
    choices: tuple[str, ...] | None = None,
    check: Callable[[Value], object] | None = None,
) -> VariableSpec:
    return VariableSpec(name, str, default, choices=choices, help=help, check=check)


#: The modes of an ordered mirror hostgroup: lossless spills to disk at the memory bound, lossy drops (and counts).
MIRROR_ORDERED_MODES = ("lossless", "lossy")


def ordered_mirror_hostgroups(value: Value) -> dict[int, str]:
    """``mysql-mirror_ordered_hostgroups`` as {hostgroup: mode}: ``'700, 701:lossy'`` -> {700: 'lossless', 701:
    'lossy'}; '' -> {}. ValueError names the item that is not ``HOSTGROUP`` or ``HOSTGROUP:MODE``."""
    text = str(value)
    modes: dict[int, str] = {}
    if not text.strip():
        return modes
    for item in text.split(","):
        number, colon, mode = (part.strip() for part in item.partition(":"))
        if not number.isascii() or not number.isdigit() or int(number) > 2**32 - 1:
            raise ValueError(
                f"{item.strip()!r} is not a hostgroup: list HOSTGROUP or HOSTGROUP:lossless or HOSTGROUP:lossy, "
                "comma-separated (e.g. '700,701:lossy')"
            )
        if colon and mode.lower() not in MIRROR_ORDERED_MODES:
            raise ValueError(f"hostgroup {number}: mode {mode!r} is not lossless or lossy")
        if int(number) in modes:
            raise ValueError(f"hostgroup {number} is listed twice")
        modes[int(number)] = mode.lower() if colon else "lossless"
    return modes


def absolute_path(value: Value) -> None:
    """A file path variable's check: empty (not set) or an absolute path."""
    text = str(value)
    if text and (not text.startswith("/") or "\x00" in text):
        raise ValueError(f"{text!r} is not an absolute path (write the file's full path, or '' for none)")


#: The TLS variables that name files, as (certificate, key) pairs that are set together or not at all.
TLS_FILE_PAIRS = (("mysql-ssl_cert", "mysql-ssl_key"), ("mysql-ssl_p2s_cert", "mysql-ssl_p2s_key"))


_SPECS = (
    # Frontend: listener, handshake, limits.
    _int("mysql-threads", 4, "worker threads; read at start only", minimum=1, maximum=256),
    _int("mysql-max_connections", 10000, "frontend (client) connection limit", minimum=1, maximum=1_000_000),
    _str("mysql-interfaces", "127.0.0.1:6033", "where clients connect: host:port, several separated by ';'"),
    _int(
        "mysql-connect_timeout_client",
        10000,
        "ms a client may take to complete the handshake and login before it is disconnected",
        minimum=1,
    ),
    _str("mysql-eventslog_filename", "", "file the query events log appends to (JSON lines); empty: no log"),
    _bool("mysql-eventslog_default_log", False, "log every query, not only those whose rule says log=1"),
    _str(
        "mysql-server_version",
        "",
        "server version reported to clients in the handshake; empty (ProxyFleet's default, ProxySQL reports "
        "8.0.11) reports the backends' own version, so that clients pick features and collations the backends have",
    ),
    _str(
        "mysql-default_authentication_plugin",
        "mysql_native_password",
        "authentication plugin offered to clients in the handshake",
        choices=("mysql_native_password", "caching_sha2_password"),
    ),
    _int(
        "mysql-max_allowed_packet",
        67_108_864,
        "largest packet accepted from a client, in bytes",
        minimum=8192,
        maximum=1_073_741_824,
    ),
    _int("mysql-wait_timeout", 28_800_000, "ms a client session may stay idle", maximum=20 * _DAY_MS),
    _int(
        "mysql-max_auth_errors_until_block",
        10,
        "failed logins in a row from one client address before it is refused for mysql-auth_block_time_ms "
        "(ProxyFleet's own, as MaxScale's max_auth_errors_until_block; 0: never)",
        minimum=0,
        maximum=1_000_000,
    ),
    _int(
        "mysql-auth_block_time_ms",
        60_000,
        "ms a client address stays refused after mysql-max_auth_errors_until_block failed logins",
        minimum=0,
        maximum=20 * _DAY_MS,
    ),
    _int(
        "mysql-net_read_timeout",
        30_000,
        "ms a client may leave a packet half sent before it is disconnected (ProxyFleet's own, as the server's "
        "net_read_timeout)",
        minimum=100,
        maximum=20 * _DAY_MS,
    ),
    _bool(
        "mysql-have_compress",
        True,
        "offer clients the compressed protocol (CLIENT_COMPRESS); backends are always spoken to uncompressed",
    ),
    _bool(
        "mysql-enable_load_data_local_infile",
        True,
        "allow LOAD DATA LOCAL INFILE. ProxyFleet default true: the file is relayed from the client, "
        "as with a direct connection; ProxySQL (default false) would read it on the proxy host instead",
    ),
    # TLS, client to proxy.
    _bool(
        "mysql-have_ssl",
        True,
        "offer clients TLS (CLIENT_SSL in the handshake; at least TLS 1.2) with mysql-ssl_cert and mysql-ssl_key, or "
        "with a self-signed certificate each proxy process makes at start when they are not set (encryption "
        "without proof of the proxy's identity, as ProxySQL's generated certificate). Users with use_ssl=1 must "
        "log in over TLS",
    ),
    _str(
        "mysql-ssl_cert",
        "",
        "ProxyFleet's own (ProxySQL reads proxysql-cert.pem from its datadir): PEM certificate, with its chain, the "
        "proxy presents to clients; absolute path, read at start and at each reload; '' for a self-signed one",
        check=absolute_path,
    ),
    _str(
        "mysql-ssl_key",
        "",
        "ProxyFleet's own (ProxySQL: proxysql-key.pem): PEM private key of mysql-ssl_cert; absolute path",
        check=absolute_path,
    ),
    _str(
        "mysql-ssl_ca",
        "",
        "ProxyFleet's own (ProxySQL: proxysql-ca.pem): PEM CA certificates; when set, clients are asked for a "
        "certificate and one that does not chain to these CAs is refused; absolute path, '' for none",
        check=absolute_path,
    ),
    # TLS, proxy to servers (mysql_servers.use_ssl=1).
    _str(
        "mysql-ssl_p2s_ca",
        "",
        "PEM CA certificates that servers' certificates are verified against when mysql-ssl_p2s_verify is true; "
        "absolute path, '' for the system's store",
        check=absolute_path,
    ),
    _str(
        "mysql-ssl_p2s_cert",
        "",
        "PEM client certificate the proxy presents to servers with use_ssl=1 (for REQUIRE X509); absolute path",
        check=absolute_path,
    ),
    _str("mysql-ssl_p2s_key", "", "PEM private key of mysql-ssl_p2s_cert; absolute path", check=absolute_path),
    _bool(
        "mysql-ssl_p2s_verify",
        False,
        "ProxyFleet's own: verify the certificate of servers with use_ssl=1 against mysql-ssl_p2s_ca and their "
        "mysql_servers.hostname; false (ProxySQL's behaviour) encrypts without proving who the server is",
    ),
    # Backend connections and the pool.
    _int(
        "mysql-connect_timeout_server",
        1000,
        "ms allowed for one backend connect attempt",
        minimum=10,
        maximum=120_000,
    ),
    _int(
        "mysql-connect_timeout_server_max",
        10000,
        "ms allowed for all connect attempts of one request; then error 9001",
        minimum=10,
        maximum=3_600_000,
    ),
    _int(
        "mysql-connect_retries_on_failure",
        10,
        "backend connect retries before the request fails",
        maximum=1000,
    ),
    _int("mysql-connect_retries_delay", 1, "ms between backend connect retries", maximum=10000),
    _int(
        "mysql-connection_wait_timeout",
        10000,
        "ProxyFleet's own: ms a session waits for a free pooled connection when every server of the "
        "hostgroup is at max_connections, before the query fails (0: fail at once)",
        maximum=3_600_000,
    ),
    _int(
        "mysql-no_writer_wait_ms",
        5000,
        "ProxyFleet's own: ms a query for the writer hostgroup of a mysql_replication_hostgroups pair waits for "
        "a writer to appear while it has none ONLINE (failover, a writer set read_only), before it fails with an "
        "error naming the hostgroup (0: fail at once)",
        maximum=3_600_000,
    ),
    _int(
        "mysql-shun_on_failures",
        5,
        "connect errors to one server within a second that shun it",
        maximum=10_000_000,
    ),
    _int(
        "mysql-shun_recovery_time_sec",
        10,
        "seconds before a shunned server is tried again; keep below connect_timeout_server_max/1000",
        maximum=31_536_000,
    ),
    _int(
        "mysql-free_connections_pct",
        10,
        "idle connections kept per server, as a percentage of its max_connections",
        maximum=100,
    ),
    _int(
        "mysql-connection_max_age_ms",
        0,
        "close idle pooled connections older than this many ms (0: never)",
        maximum=_DAY_MS,
    ),
    _int(
        "mysql-ping_interval_server_msec",
        10000,
        "ms between keep-alive pings of idle pooled connections",
        minimum=1000,
        maximum=7 * _DAY_MS,
    ),
    _int(
        "mysql-ping_timeout_server",
        200,
        "ms a keep-alive ping may take before the connection is dropped",
        minimum=10,
        maximum=600_000,
    ),
    _int(
        "mysql-throttle_connections_per_sec_to_hostgroup",
        1_000_000,
        "new backend connections per second allowed to one hostgroup (shared by the workers); a session that needs "
        "one beyond it waits in line for a connection",
        minimum=1,
        maximum=100_000_000,
    ),
    _int(
        "mysql-max_connects_in_flight",
        16,
        "ProxyFleet's own: backend connects one worker has under way to one server at once; a session that needs "
        "another waits in line for a connection (one released, or the next connect), so that a burst of logins "
        "neither floods the server nor times out its own connects (0: no bound)",
        maximum=100_000,
    ),
    _bool(
        "mysql-kill_backend_connection_when_disconnect",
        True,
        "kill the statement on the backend when its client disconnects in the middle of it (KILL QUERY from a "
        "separate connection; the session's connection is then reset and pooled, or closed)",
    ),
    # Queries.
    _int(
        "mysql-default_query_timeout",
        NO_TIMEOUT_MS,
        "ms after which a running query is killed, unless a rule sets its own timeout",
        minimum=1000,
        maximum=20 * _DAY_MS,
    ),
    _int("mysql-default_query_delay", 0, "ms every query is delayed (throttling)", maximum=3_600_000),
    _int(
        "mysql-query_retries_on_failure",
        1,
        "times a query is re-run on a new connection after a backend failure, when that is safe",
        maximum=1000,
    ),
    _int(
        "mysql-long_query_time",
        1000,
        "ms from which a query counts as slow (Slow_queries)",
        maximum=20 * _DAY_MS,
    ),
    _int(
        "mysql-max_transaction_time",
        14_400_000,
        "ms a transaction may run before its session is killed",
        minimum=1000,
        maximum=20 * _DAY_MS,
    ),
    _int(
        "mysql-max_transaction_idle_time",
        14_400_000,
        "ms a transaction may stay idle before its session is killed",
        minimum=1000,
        maximum=20 * _DAY_MS,
    ),
    # Multiplexing and transactions.
    _bool("mysql-multiplexing", True, "share backend connections between sessions between queries"),
    _int(
        "mysql-set_query_lock_on_hostgroup",
        1,
        "1: a SET the proxy cannot parse locks the session to its current hostgroup (error 9006 elsewhere)",
        maximum=1,
    ),
    _str(
        "mysql-keep_multiplexing_variables",
        "tx_isolation,transaction_isolation,version",
        "comma list of @@variables a SELECT may read without disabling multiplexing",
    ),
    _int(
        "mysql-connection_delay_multiplex_ms",
        0,
        "ms a backend connection stays with its session after each query",
        maximum=300_000,
    ),
    _int(
        "mysql-auto_increment_delay_multiplex",
        5,
        "queries a session keeps its connection after an INSERT that returned an insert id",
        maximum=1_000_000,
    ),
    _int(
        "mysql-auto_increment_delay_multiplex_timeout_ms",
        10000,
        "ms after which auto_increment_delay_multiplex stops holding the connection (0: no limit)",
        maximum=3_600_000,
    ),
    _bool(
        "mysql-autocommit_false_is_transaction",
        True,
        "treat a session with autocommit=0 as inside a transaction, so it stays on one connection. "
        "ProxyFleet default true: ProxySQL's false default, which splits such 'transactions' across "
        "servers, is its most common complaint",
    ),
    _bool(
        "mysql-autocommit_false_not_reusable",
        False,
        "never return a connection that had autocommit=0 to the pool",
    ),
    _bool(
        "mysql-enforce_autocommit_on_reads",
        False,
        "apply the session's autocommit on the backend for SELECTs too",
    ),
    # Query cache.
    _int("mysql-query_cache_size_MB", 256, "query cache size in MiB", maximum=10_485_760),
    _int(
        "mysql-query_cache_soft_ttl_pct",
        0,
        "percentage of cache_ttl after which one client refreshes an entry while others still read it",
        maximum=100,
    ),
    _bool(
        "mysql-query_cache_stores_empty_result",
        True,
        "cache results with no rows (a rule's cache_empty_result overrides it)",
    ),
    # Digests and stats.
    _bool("mysql-query_digests", True, "collect per-digest statistics (stats_mysql_query_digest)"),
    _int(
        "mysql-query_digests_max_digest_length",
        2048,
        "longest digest text kept, in bytes",
        minimum=16,
        maximum=1_048_576,
    ),
    _int(
        "mysql-query_digests_max_query_length",
        65000,
        "longest query text digested, in bytes",
        minimum=16,
        maximum=1_048_576,
    ),
    _bool("mysql-query_digests_lowercase", False, "lowercase the digest text"),
    _bool("mysql-query_digests_no_digits", False, "replace digits inside identifiers by '?' in digests"),
    _bool("mysql-query_digests_replace_null", False, "replace NULL by '?' in digests"),
    _int(
        "mysql-query_digests_grouping_limit",
        3,
        "values kept in a digest's IN (...) and VALUES lists before they are grouped as '...'",
        minimum=1,
        maximum=2089,
    ),
    # Mirroring.
    _int(
        "mysql-mirror_max_concurrency",
        16,
        "mirrored statements (and ordered mirror sessions) executing at once, split between worker processes; "
        "more wait in the queue",
        minimum=1,
        maximum=8192,
    ),
    _int(
        "mysql-mirror_max_queue_length",
        32000,
        "mirrors waiting per worker (ProxySQL mode); when full, new mirrors are dropped (counted by reason)",
        maximum=1_048_576,
    ),
    _str(
        "mysql-mirror_ordered_hostgroups",
        "",
        "ProxyFleet's own: mirror hostgroups in ordered mode, comma-separated HOSTGROUP[:lossless|:lossy] "
        "(e.g. '700,701:lossy'): each session's mirrored statements run there in its order, on one connection, "
        "in its committed transactions; at mysql-mirror_ordered_max_memory lossless spills to disk, lossy drops. "
        "Other mirror hostgroups work as in ProxySQL (mysql-mirror_max_queue_length, any order, drops)",
        check=ordered_mirror_hostgroups,
    ),
    _int(
        "mysql-mirror_ordered_max_memory",
        64 << 20,
        "ProxyFleet's own: bytes of committed statements the ordered mirror queues hold in memory (split between "
        "worker processes); beyond it lossless hostgroups spill to mysql-mirror_spill_dir, lossy ones drop",
        maximum=1 << 40,
    ),
    _str(
        "mysql-mirror_spill_dir",
        "",
        "ProxyFleet's own: directory of the ordered mirror's durable queue (SQLite, a file per worker process); "
        "'' is 'mirror-queue' beside the config file (a node's state directory), a relative path is taken from "
        "there; read at start",
    ),
    # Monitor.
    _bool("mysql-monitor_enabled", True, "run the monitor's connect, ping, read_only and lag checks"),
    _str("mysql-monitor_username", "monitor", "user the monitor logs in to backends as"),
    _str("mysql-monitor_password", "monitor", "password of mysql-monitor_username"),
    _str(
        "pgsql-monitor_username",
        "monitor",
        "user the monitor logs in to PostgreSQL servers as (their checks follow the mysql-monitor_* intervals)",
    ),
    _str("pgsql-monitor_password", "monitor", "password of pgsql-monitor_username"),
    _str("pgsql-monitor_dbname", "postgres", "database the monitor connects to on PostgreSQL servers"),
    _str(
        "pgsql-interfaces",
        "",
        "where PostgreSQL clients connect to the pooling proxy (host:port; '' for no PostgreSQL listener; ProxySQL "
        "uses port 6133)",
    ),
    _int(
        "pgsql-connection_wait_timeout",
        10_000,
        "ms a PostgreSQL client waits for a server connection when its servers' max_connections are all in use",
        minimum=1,
        maximum=3_600_000,
    ),
    _int(
        "pgsql-no_writer_wait_ms",
        5000,
        "ProxyFleet's own: ms a PostgreSQL client of the writer hostgroup of a pgsql_replication_hostgroups pair "
        "waits for a writer to appear while it has none ONLINE (failover, the monitor still placing the servers), "
        "before it is refused with the reason (0: refuse at once)",
        maximum=3_600_000,
    ),
    _int(
        "pgsql-max_prepared_statements",
        200,
        "named prepared statements kept prepared on each server connection under transaction pooling (least "
        "recently used closed beyond it)",
        minimum=1,
        maximum=100_000,
    ),
    _int(
        "pgsql-connect_timeout_server",
        1000,
        "ms a connect to a PostgreSQL server may take before the next server is tried",
        minimum=1,
        maximum=3_600_000,
    ),
    _int(
        "pgsql-connect_timeout_client",
        10_000,
        "ms a client of a forwarding listener has to send its first message",
        minimum=100,
        maximum=3_600_000,
    ),
    _int(
        "pgsql-default_query_timeout",
        NO_TIMEOUT_MS,
        "ms after which the server is asked to cancel a running PostgreSQL statement (CancelRequest), unless a "
        "pgsql_query_rules timeout says otherwise",
        minimum=1000,
        maximum=20 * _DAY_MS,
    ),
    _int("pgsql-query_cache_size_MB", 256, "PostgreSQL query cache size in MiB", maximum=10_485_760),
    _bool(
        "pgsql-query_cache_stores_empty_result",
        True,
        "cache PostgreSQL answers with no rows (a rule's cache_empty_result overrides it)",
    ),
    _int(
        "pgsql-connect_retries_on_failure",
        10,
        "other PostgreSQL servers tried when a connect fails",
        maximum=1000,
    ),
    _int(
        "mysql-monitor_connect_interval",
        120_000,
        "ms between connect checks",
        minimum=100,
        maximum=7 * _DAY_MS,
    ),
    _int("mysql-monitor_connect_timeout", 600, "ms a connect check may take", minimum=100, maximum=600_000),
    _int(
        "mysql-monitor_ping_interval",
        8000,
        "ms between ping checks",
        minimum=100,
        maximum=7 * _DAY_MS,
    ),
    _int("mysql-monitor_ping_timeout", 1000, "ms a ping check may take", minimum=100, maximum=600_000),
    _int(
        "mysql-monitor_ping_max_failures",
        3,
        "consecutive failed pings (or connect checks) that shun a server",
        minimum=1,
        maximum=1_000_000,
    ),
    _int(
        "mysql-monitor_read_only_interval",
        1000,
        "ms between read_only checks of servers in replication hostgroups",
        minimum=100,
        maximum=7 * _DAY_MS,
    ),
    _int(
        "mysql-monitor_read_only_timeout",
        800,
        "ms a read_only check may take",
        minimum=100,
        maximum=600_000,
    ),
    _int(
        "mysql-monitor_read_only_max_timeout_count",
        3,
        "consecutive read_only checks that cannot reach a server (timeout, refused, broken connection) that shun "
        "it; ProxySQL instead treats a writer that times out as read-only and demotes it (its issue #1742)",
        minimum=1,
        maximum=1_000_000,
    ),
    _bool(
        "mysql-monitor_writer_is_also_reader",
        True,
        "a server the monitor moves into the writer hostgroup (its read_only turned 0) stays in the reader "
        "hostgroup it was in",
    ),
    _int(
        "mysql-monitor_replication_lag_interval",
        10000,
        "ms between replication lag checks of servers with max_replication_lag > 0",
        minimum=100,
        maximum=7 * _DAY_MS,
    ),
    _int(
        "mysql-monitor_replication_lag_timeout",
        1000,
        "ms a replication lag check may take",
        minimum=100,
        maximum=600_000,
    ),
    _int(
        "mysql-monitor_replication_lag_count",
        1,
        "consecutive checks over max_replication_lag that shun a replica",
        minimum=1,
        maximum=10,
    ),
    _str(
        "mysql-monitor_replication_lag_use_percona_heartbeat",
        "",
        "pt-heartbeat table (schema.table) to read lag from instead of SHOW SLAVE STATUS ('': not used)",
    ),
    _int(
        "mysql-monitor_slave_lag_when_null",
        60,
        "lag in seconds assumed when Seconds_Behind_Master is NULL (replication broken)",
        maximum=604_800,
    ),
    _int(
        "mysql-monitor_history",
        7_200_000,
        "ms the monitor's check logs are kept",
        minimum=1000,
        maximum=7 * _DAY_MS,
    ),
    # Sharding (docs/sharding.md).
    _bool(
        "mysql-sharding_cross_shard_writes",
        True,
        "a write over several shards commits on all of them or none with XA (false: it is refused with an error "
        "that says so)",
    ),
    _int(
        "mysql-sharding_sequence_block",
        1000,
        "values of a sharded table's sequence a proxy worker reserves at a time (sequence_column): larger, fewer "
        "round trips to shard 0; smaller, fewer values left unused when the worker stops",
        minimum=1,
        maximum=1_000_000_000,
    ),
    # Hot rows: the per-key transaction queue (docs/hot-rows.md).
    _bool(
        "mysql-trx_queue_hints",
        True,
        "honour a statement's trx_queue=QUEUE:KEY comment (its transaction waits in line for the key); false: only "
        "query rules queue transactions",
    ),
    _int(
        "mysql-trx_queue_concurrency",
        1,
        "transactions that may hold one key of a hot-row queue at once; the others wait in line before they take a "
        "backend connection",
        minimum=1,
        maximum=1024,
    ),
    _int(
        "mysql-trx_queue_wait_timeout_ms",
        10_000,
        "ms a transaction waits for a hot-row queue's key before its statement fails with an error naming the key",
        minimum=1,
        maximum=3_600_000,
    ),
    _int(
        "mysql-trx_queue_max_waiters",
        1024,
        "transactions that may wait for one key; one more is refused at once with an error naming the key",
        minimum=1,
        maximum=1_000_000,
    ),
    _int(
        "mysql-trx_queue_max_keys",
        100_000,
        "keys held or waited for at once in all hot-row queues of the node; a new key beyond it runs without the queue",
        minimum=1,
        maximum=10_000_000,
    ),
    _int(
        "mysql-trx_queue_heat_slow_ms",
        20,
        "a write or locking read that takes this long counts as a lock wait in the search for hot keys",
        minimum=1,
        maximum=3_600_000,
    ),
    _int(
        "mysql-trx_queue_heat_threshold",
        20,
        "lock waits, deadlocks and lock wait timeouts on one table's column within a minute, a key among them seen "
        "three times, before the proxy proposes a queue for it",
        minimum=1,
        maximum=1_000_000,
    ),
    _int(
        "mysql-trx_queue_heat_cooldown_ms",
        300_000,
        "ms without such evidence after which a proposal (and a queue the proxy applied itself) is withdrawn",
        minimum=1000,
        maximum=86_400_000,
    ),
    _bool(
        "mysql-trx_queue_auto_apply",
        False,
        "queue the hot keys the proxy finds by itself (lock waits, deadlocks, one key per digest) without waiting "
        "for a DBA to accept the proposal; a queue is withdrawn when the heat is gone",
    ),
    _str(
        "mysql-sharding_xa_log_dir",
        "",
        "directory of the XA decision logs ('': xa-log beside the config file); keep it across restarts",
    ),
    _str(
        "mysql-sharding_xa_identity",
        "",
        "name setting this proxy's XA transactions apart from other proxies' on the same shard servers ('': the "
        "host's name and the config file's path); keep it across restarts",
    ),
    # Admin (the HTTP admin and its stats).
    _bool(
        "admin-restapi_enabled",
        True,
        "serve the HTTP admin (JSON stats, /metrics, /reload, /config); ProxyFleet default true",
    ),
    _str("admin-restapi_interface", "127.0.0.1", "address the HTTP admin listens on"),
    _int("admin-restapi_port", 6070, "port the HTTP admin listens on", minimum=1, maximum=65535),
    _int(
        "admin-stats_report_interval_ms",
        5000,
        "ms between stats reports to the control plane",
        minimum=100,
        maximum=3_600_000,
    ),
)

#: Every known global variable, by name.
VARIABLES: dict[str, VariableSpec] = {spec.name: spec for spec in _SPECS}

#: ProxySQL variables accepted (a ``proxysql.cnf`` that sets them imports) that ProxyFleet does not act on yet: a
#: config that sets one to another value than its default gets a warning saying so, never silence.
NOT_HONOURED = frozenset(
    {
        "mysql-set_query_lock_on_hostgroup",
        "mysql-keep_multiplexing_variables",
        "mysql-connection_delay_multiplex_ms",
        "mysql-auto_increment_delay_multiplex",
        "mysql-auto_increment_delay_multiplex_timeout_ms",
        "mysql-autocommit_false_not_reusable",
        "mysql-enforce_autocommit_on_reads",
        "mysql-query_cache_soft_ttl_pct",
        "mysql-query_digests_max_query_length",
        "mysql-query_digests_lowercase",
        "mysql-query_digests_no_digits",
        "mysql-query_digests_replace_null",
        "mysql-query_digests_grouping_limit",
        "mysql-monitor_replication_lag_use_percona_heartbeat",
        "admin-stats_report_interval_ms",
    }
)


def variable_spec(name: str) -> VariableSpec:
    """The spec of a known variable; ValueError for an unknown name, suggesting close ones."""
    spec = VARIABLES.get(name)
    if spec is None:
        raise ValueError(f"unknown variable {name!r}{did_you_mean(name, VARIABLES)}")
    return spec


def parse_variable_value(name: str, raw: object) -> Value:
    """The typed value of variable ``name`` given as ``raw`` (a JSON scalar or a string).

    Booleans accept true/false, 1/0 and the strings 'true', 'false', '1', '0'; integers accept ints and
    decimal strings. ValueError names the variable and says what is wrong.
    """
    spec = variable_spec(name)
    try:
        return spec.parse(raw)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


class Variables(Mapping[str, Value]):
    """An immutable view of every known variable: the explicitly set values over the registry's defaults.

    Two ``Variables`` are equal when they set the same variables to the same values.
    """

    __slots__ = ("_overrides",)

    def __init__(self, values: Mapping[str, object] | None = None) -> None:
        parsed = {name: parse_variable_value(name, raw) for name, raw in (values or {}).items()}
        self._overrides: dict[str, Value] = dict(sorted(parsed.items()))

    @classmethod
    def from_rows(cls, rows: Iterable[GlobalVariable]) -> Variables:
        """The variables set by ``global_variables`` rows; ValueError on a bad or repeated name or value."""
        values: dict[str, str] = {}
        for row in rows:
            if row.variable_name in values:
                raise ValueError(f"variable {row.variable_name!r} is set twice")
            values[row.variable_name] = row.variable_value
        return cls(values)

    def overrides(self) -> dict[str, Value]:
        """Only the explicitly set variables, by name."""
        return dict(self._overrides)

    def rows(self) -> list[dict[str, str]]:
        """The overrides as ``global_variables`` rows, values as text the way ProxySQL shows them."""
        return [
            {"variable_name": name, "variable_value": VARIABLES[name].format(value)}
            for name, value in self._overrides.items()
        ]

    def __getitem__(self, name: str) -> Value:
        if name in self._overrides:
            return self._overrides[name]
        spec = VARIABLES.get(name)
        if spec is None:
            raise KeyError(f"unknown variable {name!r}{did_you_mean(name, VARIABLES)}")
        return spec.default

    def integer(self, name: str) -> int:
        """The value of an ``int`` variable."""
        value = self[name]
        if type(value) is not int:
            raise TypeError(f"variable {name!r} is not an integer")
        return value

    def flag(self, name: str) -> bool:
        """The value of a ``bool`` variable."""
        value = self[name]
        if type(value) is not bool:
            raise TypeError(f"variable {name!r} is not a boolean")
        return value

    def text(self, name: str) -> str:
        """The value of a ``str`` variable."""
        value = self[name]
        if not isinstance(value, str):
            raise TypeError(f"variable {name!r} is not a string")
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(VARIABLES)

    def __len__(self) -> int:
        return len(VARIABLES)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Variables):
            return NotImplemented
        return self._overrides == other._overrides

    def __hash__(self) -> int:
        return hash(tuple(self._overrides.items()))

    def __repr__(self) -> str:
        return f"Variables({self._overrides!r})"

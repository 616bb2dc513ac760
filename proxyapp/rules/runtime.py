"""The running configuration: everything a session consults per query, built once per config load.

A reload builds a new ``Runtime`` and swaps one reference; sessions read that reference at each command, so a
command in flight finishes under the config it started with and the next one sees the new config.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from proxyapp.config.document import Config
from proxyapp.config.tables import MysqlUser
from proxyapp.rules.engine import RuleEngine
from proxyapp.sharding.shardmap import ShardMap


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The global variables sessions follow."""

    server_version: str
    auth_plugin: str
    max_connections: int
    autocommit_false_is_transaction: bool
    default_query_timeout_ms: int
    query_retries_on_failure: int
    long_query_time_ms: int
    local_infile: bool
    have_compress: bool
    multiplexing: bool
    query_digests: bool
    max_digest_length: int
    max_allowed_packet: int
    wait_timeout_ms: int
    net_read_timeout_ms: int
    eventslog_filename: str
    connect_timeout_client_ms: int
    eventslog_default_log: bool
    default_query_delay_ms: int
    max_transaction_time_ms: int
    max_transaction_idle_time_ms: int
    query_cache_stores_empty_result: bool
    kill_backend_when_disconnect: bool
    cross_shard_writes: bool


@dataclass(frozen=True, slots=True)
class Runtime:
    """A loaded config with its compiled rules and lookup tables."""

    config: Config
    rules: RuleEngine
    frontend_users: dict[str, MysqlUser]
    backend_users: dict[str, MysqlUser]
    settings: SessionSettings
    writer_of: dict[int, int]  # reader hostgroup -> its writer hostgroup (mysql_replication_hostgroups)
    shard_map: ShardMap | None  # the sharded tables; None when the config has none (the unsharded path's one test)
    holds_begin: bool  # a BEGIN is held back until the transaction's first statement (sharded tables, hot-row queues)
    loaded_at: float
    source: str

    @classmethod
    def build(cls, config: Config, source: str) -> Runtime:
        """Compile a validated config."""
        v = config.variables
        settings = SessionSettings(
            server_version=v.text("mysql-server_version"),
            auth_plugin=v.text("mysql-default_authentication_plugin"),
            max_connections=v.integer("mysql-max_connections"),
            autocommit_false_is_transaction=v.flag("mysql-autocommit_false_is_transaction"),
            default_query_timeout_ms=v.integer("mysql-default_query_timeout"),
            query_retries_on_failure=v.integer("mysql-query_retries_on_failure"),
            long_query_time_ms=v.integer("mysql-long_query_time"),
            local_infile=v.flag("mysql-enable_load_data_local_infile"),
            have_compress=v.flag("mysql-have_compress"),
            multiplexing=v.flag("mysql-multiplexing"),
            query_digests=v.flag("mysql-query_digests"),
            max_digest_length=v.integer("mysql-query_digests_max_digest_length"),
            max_allowed_packet=v.integer("mysql-max_allowed_packet"),
            wait_timeout_ms=v.integer("mysql-wait_timeout"),
            net_read_timeout_ms=v.integer("mysql-net_read_timeout"),
            eventslog_filename=v.text("mysql-eventslog_filename"),
            connect_timeout_client_ms=v.integer("mysql-connect_timeout_client"),
            eventslog_default_log=v.flag("mysql-eventslog_default_log"),
            default_query_delay_ms=v.integer("mysql-default_query_delay"),
            max_transaction_time_ms=v.integer("mysql-max_transaction_time"),
            max_transaction_idle_time_ms=v.integer("mysql-max_transaction_idle_time"),
            query_cache_stores_empty_result=v.flag("mysql-query_cache_stores_empty_result"),
            kill_backend_when_disconnect=v.flag("mysql-kill_backend_connection_when_disconnect"),
            cross_shard_writes=v.flag("mysql-sharding_cross_shard_writes"),
        )
        shard_map = ShardMap.build(config) if config.mysql_sharded_tables else None
        queued = v.flag("mysql-trx_queue_hints") or any(r.active and r.trx_queue for r in config.mysql_query_rules)
        frontend = {u.username: u for u in config.mysql_users if u.active and u.frontend}
        backend = {u.username: u for u in config.mysql_users if u.active and u.backend}
        return cls(
            config=config,
            rules=RuleEngine(config.mysql_query_rules, config.mysql_query_rules_fast_routing),
            frontend_users=frontend,
            backend_users=backend,
            settings=settings,
            writer_of={p.reader_hostgroup: p.writer_hostgroup for p in config.mysql_replication_hostgroups},
            shard_map=shard_map,
            holds_begin=shard_map is not None or queued,
            loaded_at=time.time(),
            source=source,
        )

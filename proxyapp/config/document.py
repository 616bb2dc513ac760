"""The config document: parsing and validating it into a ``Config``, its canonical form and its checksum.

The document is a JSON object keyed by table name (``proxyapp.config.tables.TABLES``); each table is a list of row
objects keyed by column name. Omitted tables are empty and omitted columns take their defaults. Rows are
checked one at a time by ``validate_row``, which is driven by the table dataclasses' fields and metadata so the
control plane's forms apply the very same checks, then across rows (unique keys, replication pairs). Every
problem is collected before ``ConfigError`` is raised, each message naming its table, row, key and column.

Why one file of this size: the checks across tables (keys, replication pairs, rules that can never match) read the
same parsed rows as the per-row checks, and the canonical form and checksum must follow the parser exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_type_hints

from proxyapp.config.jsontext import DuplicateKey, read_json
from proxyapp.config.rulecheck import shadowed_rules
from proxyapp.config.rulecompile import check_rule
from proxyapp.config.sharding import build, parse_parameters, string_keyed
from proxyapp.config.tables import (
    INT_MAX,
    RE_MODIFIERS,
    TABLES,
    GlobalVariable,
    MysqlQueryRule,
    MysqlQueryRuleFastRouting,
    MysqlReplicationHostgroup,
    MysqlServer,
    MysqlShard,
    MysqlShardedTable,
    MysqlUser,
    PgsqlForwardListener,
    PgsqlQueryRule,
    PgsqlReplicationHostgroup,
    PgsqlServer,
    PgsqlUser,
)
from proxyapp.config.variables import (
    NOT_HONOURED,
    TLS_FILE_PAIRS,
    VARIABLES,
    Variables,
    check_range,
    did_you_mean,
    parse_int,
    show_value,
    variable_spec,
)

# Tables whose rows a Config keeps as row objects (global_variables become its Variables).
_ROW_TABLES = (
    "mysql_servers",
    "mysql_users",
    "mysql_query_rules",
    "mysql_query_rules_fast_routing",
    "mysql_replication_hostgroups",
    "mysql_shards",
    "mysql_sharded_tables",
    "pgsql_servers",
    "pgsql_users",
    "pgsql_query_rules",
    "pgsql_replication_hostgroups",
    "pgsql_forward_listeners",
)
#: Tables a document shows only when they have rows (added after others: configs without them keep their checksum).
_OPTIONAL_TABLES = frozenset(
    {
        "mysql_query_rules_fast_routing",
        "mysql_shards",
        "mysql_sharded_tables",
        "pgsql_servers",
        "pgsql_users",
        "pgsql_query_rules",
        "pgsql_replication_hostgroups",
        "pgsql_forward_listeners",
    }
)

#: Per table, its unique keys as ProxySQL declares them; the first is the primary key, which orders the rows.
UNIQUE_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "mysql_servers": (("hostgroup_id", "hostname", "port"),),
    "mysql_users": (("username", "backend"), ("username", "frontend")),
    "mysql_query_rules": (("rule_id",),),
    "mysql_query_rules_fast_routing": (("username", "schemaname", "flagIN"),),
    "mysql_replication_hostgroups": (("writer_hostgroup",), ("reader_hostgroup",)),
    "mysql_shards": (("shard_group", "shard"),),
    "mysql_sharded_tables": (("schemaname", "tablename"),),
    "pgsql_servers": (("hostgroup_id", "hostname", "port"),),
    "pgsql_users": (("username", "backend"), ("username", "frontend")),
    "pgsql_query_rules": (("rule_id",),),
    "pgsql_replication_hostgroups": (("writer_hostgroup",), ("reader_hostgroup",)),
    "pgsql_forward_listeners": (("port",),),
    "global_variables": (("variable_name",),),
}

# The columns that name a row in messages.
_LABEL_COLUMNS: dict[str, tuple[str, ...]] = {
    "mysql_servers": ("hostgroup_id", "hostname", "port"),
    "mysql_users": ("username",),
    "mysql_query_rules": ("rule_id",),
    "mysql_query_rules_fast_routing": ("username", "schemaname", "flagIN"),
    "mysql_replication_hostgroups": ("writer_hostgroup",),
    "mysql_shards": ("shard_group", "shard"),
    "mysql_sharded_tables": ("schemaname", "tablename"),
    "pgsql_servers": ("hostgroup_id", "hostname", "port"),
    "pgsql_users": ("username",),
    "pgsql_query_rules": ("rule_id",),
    "pgsql_replication_hostgroups": ("writer_hostgroup",),
    "pgsql_forward_listeners": ("port",),
    "global_variables": ("variable_name",),
}

# The columns, other than mysql_servers.hostgroup_id, that refer to a hostgroup.
_HOSTGROUP_REFERENCES: dict[str, tuple[str, ...]] = {
    "mysql_users": ("default_hostgroup",),
    "mysql_query_rules": ("destination_hostgroup", "mirror_hostgroup", "gtid_from_hostgroup"),
    "mysql_query_rules_fast_routing": ("destination_hostgroup",),
    "mysql_replication_hostgroups": ("writer_hostgroup", "reader_hostgroup"),
    "mysql_shards": ("hostgroup_id",),
}

_DIGEST = re.compile(r"0x[0-9A-Fa-f]{1,16}")

# A row error: (column, message); the column is "" for an error about the whole row.
RowError = tuple[str, str]


class ConfigError(Exception):
    """A refused config; ``errors`` lists every problem found, each naming its table, row and column."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors: list[str] = list(errors)
        super().__init__(self.errors)

    def __str__(self) -> str:
        if len(self.errors) == 1:
            return self.errors[0]
        return f"{len(self.errors)} config errors:\n" + "\n".join(f"  {error}" for error in self.errors)


# --- one row ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """A table column as the dataclass field declares it: Python type, nullability, default and checks."""

    name: str
    type: type
    nullable: bool
    default: Any  # dataclasses.MISSING for a required column
    minimum: int | None
    maximum: int | None
    choices: tuple[Any, ...] | None
    regex: bool
    blank: bool  # whether an empty text is a value
    help: str

    def convert(self, raw: object) -> Any:
        """The column value for ``raw`` from the document; ValueError says what is wrong with it.

        Blank means null in a nullable text column (``blank_is_null``); a message that says nothing is refused.
        """
        if raw is None:
            if self.nullable:
                return None
            raise ValueError("null is not allowed")
        if isinstance(raw, str) and self.name in MESSAGE_COLUMNS and not raw.strip():
            raise ValueError("an empty message; leave it null for none (a blank message would still answer)")
        if isinstance(raw, str) and not self.blank and not raw.strip():
            raise ValueError("may not be empty")
        if raw == "" and self.blank_is_null:
            return None
        if self.type is bool:
            value: Any = _to_bool(raw)
        elif self.type is int:
            value = parse_int(raw)
        elif isinstance(raw, str):
            value = raw
        else:
            raise ValueError(f"expected a string, got {show_value(raw)}")
        check_range(value, self.minimum, self.maximum, self.choices)
        if self.regex:
            _check_regex(value)
        if self.name in _VALUE_CHECKS:
            _VALUE_CHECKS[self.name](value)
        return value

    @property
    def blank_is_null(self) -> bool:
        """Whether a blank value of this column means null (every nullable text column but ``replace_pattern``,
        where an empty replacement deletes what the rule matched, as in ProxySQL)."""
        return self.nullable and self.type is str and self.name != "replace_pattern"


#: Columns whose value is a message the proxy answers with (a rule's error or OK): never blank.
MESSAGE_COLUMNS = frozenset({"error_msg", "OK_msg"})


def blank_to_null(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its blank values set to null where blank means null: what a form or an API sends for an
    empty field means the same as in the document."""
    columns = table_columns(table)
    return {
        name: None if value == "" and name in columns and columns[name].blank_is_null else value
        for name, value in row.items()
    }


def table_columns(table: str) -> dict[str, Column]:
    """A table's columns in document order, with their types, defaults and checks; KeyError for an unknown table."""
    return _columns(TABLES[table])


@cache
def _columns(cls: type) -> dict[str, Column]:
    hints = get_type_hints(cls)
    columns = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        members = get_args(hint) or (hint,)  # (int, NoneType) for "int | None", (int,) for "int"
        nullable = type(None) in members
        (base,) = (m for m in members if m is not type(None))
        meta = f.metadata
        maximum = INT_MAX if base is int and meta["maximum"] is None else meta["maximum"]
        columns[f.name] = Column(
            f.name,
            base,
            nullable,
            f.default,
            meta["minimum"],
            maximum,
            meta["choices"],
            meta["regex"],
            meta["blank"],
            meta["help"],
        )
    return columns


def _to_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if raw in (0, 1, "0", "1") and not isinstance(raw, float):
        return raw in (1, "1")
    raise ValueError(f"expected a boolean (true, false, 0, 1, '0' or '1'), got {show_value(raw)}")


def _check_regex(value: str) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None


def _check_digest(value: str) -> None:
    if not _DIGEST.fullmatch(value):
        raise ValueError(f"{value!r} is not a digest: '0x' and 1 to 16 hex digits")


_NATIVE_HASH = re.compile(r"\*[0-9A-Fa-f]{40}")


def _check_password(value: str) -> None:
    if value.startswith("*") and not _NATIVE_HASH.fullmatch(value):
        raise ValueError(
            "starts with '*', so it is read as a mysql_native_password hash, but a hash is '*' and 40 hex digits: "
            "nobody could log in with it"
        )


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def _check_hostname(value: str) -> None:
    """A DNS name, an IPv4 or an IPv6 address: what the proxy can connect to over TCP."""
    if value.startswith("/"):
        raise ValueError(f"{value!r} is a unix socket path; ProxyFleet reaches backends over TCP: give a host name")
    if value.startswith("[") and value.endswith("]"):
        raise ValueError(f"{value!r}: write an IPv6 address without brackets")
    try:
        ipaddress.ip_address(value)
        return
    except ValueError:
        pass
    name = value[:-1] if value.endswith(".") else value
    if not name or len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in name.split(".")):
        raise ValueError(f"{value!r} is not a host name, an IPv4 address or an IPv6 address")


def _check_interface(value: str) -> None:
    """An address to listen on: an IPv4 or IPv6 address (a listener binds exactly what it is told)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address to listen on (127.0.0.1, 0.0.0.0, ::1 or ::)") from None


def _check_attributes(value: str) -> None:
    if value == "":
        return
    try:
        parsed = read_json(value)
    except DuplicateKey as exc:
        raise ValueError(f"must be '' or a JSON object; {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be '' or a JSON object; invalid JSON at column {exc.colno}: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"must be '' or a JSON object, not {show_value(parsed)}")


def parse_re_modifiers(text: str) -> frozenset[str]:
    """The modifiers in a rule's ``re_modifiers`` (comma-separated, any case); ValueError for an unknown one.

    CASELESS means matching with ``re.IGNORECASE``; GLOBAL means replace_pattern replaces every match.
    """
    names = set()
    for part in text.split(","):
        name = part.strip().upper()
        if name and name not in RE_MODIFIERS:
            raise ValueError(f"unknown modifier {part.strip()!r} (known: {', '.join(RE_MODIFIERS)})")
        if name:
            names.add(name)
    return frozenset(names)


# Checks on one column's (non-null) value, by column name.
_VALUE_CHECKS: dict[str, Callable[[Any], object]] = {
    "hostname": _check_hostname,
    "interface": _check_interface,
    "digest": _check_digest,
    "password": _check_password,
    "attributes": _check_attributes,
    "re_modifiers": parse_re_modifiers,
}


def _variable_text(raw: object) -> str:
    """A global_variables value may be written as any JSON scalar but is kept as ProxySQL's text."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int | str):
        return str(raw)
    raise ValueError(f"expected a string, an integer or a boolean, got {show_value(raw)}")


_SCRAM_VERIFIER = re.compile(r"SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+")
_MD5_HASH = re.compile(r"md5[0-9a-f]{32}")


def _pgsql_password(raw: object) -> str:
    """A pgsql_users password: clear text, a SCRAM-SHA-256 verifier or an md5 hash, as PostgreSQL stores them."""
    if not isinstance(raw, str):
        raise ValueError(f"expected a string, got {show_value(raw)}")
    if raw.startswith("SCRAM-SHA-256$") and not _SCRAM_VERIFIER.fullmatch(raw):
        raise ValueError(
            "starts with 'SCRAM-SHA-256$', so it is read as a verifier, but a verifier is "
            "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>: nobody could log in with it"
        )
    return raw


# Columns converted by their own function instead of by their type.
_CONVERTERS: dict[tuple[type, str], Callable[[object], Any]] = {
    (GlobalVariable, "variable_value"): _variable_text,
    (PgsqlUser, "password"): _pgsql_password,
}


# Checks across a row's columns; ``values`` holds the columns that converted cleanly.


def _server_checks(values: dict[str, Any]) -> Iterator[RowError]:
    gtid_port = values.get("gtid_port")
    if gtid_port and gtid_port == values.get("port"):
        yield ("gtid_port", f"{gtid_port} is also the port; use another port, or 0 for none")


def pgsql_rule_as_mysql(rule: PgsqlQueryRule) -> MysqlQueryRule:
    """A PostgreSQL rule as the rule engine reads rules: the same columns, ``database`` as ``schemaname``."""
    values = {f.name: getattr(rule, f.name) for f in dataclasses.fields(rule)}
    values["schemaname"] = values.pop("database")
    return MysqlQueryRule(**values)


def _rule_checks(values: dict[str, Any]) -> Iterator[RowError]:
    """What the rule engine could not evaluate (``rulecompile.check_rule``), once every column has a value."""
    try:
        pgsql = "database" in values
        rule = pgsql_rule_as_mysql(PgsqlQueryRule(**values)) if pgsql else MysqlQueryRule(**values)
    except TypeError:  # a column that did not convert: its error is said already
        return
    problem = check_rule(rule)
    if problem is not None:
        yield problem


def _replication_checks(values: dict[str, Any]) -> Iterator[RowError]:
    writer = values.get("writer_hostgroup")
    if writer is not None and values.get("reader_hostgroup") == writer:
        yield ("reader_hostgroup", f"{writer} is also the writer_hostgroup; they must differ")


#: A shard's physical schema: a plain identifier, as MariaDB keeps a database's name.
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_$]{1,64}")


def _shard_checks(values: dict[str, Any]) -> Iterator[RowError]:
    physical = values.get("physical_schema")
    if physical is not None and not _SCHEMA_NAME.fullmatch(physical):
        yield ("physical_schema", f"{physical!r} is not a schema name: 1 to 64 letters, digits, _ or $")


def _sharded_table_checks(values: dict[str, Any]) -> Iterator[RowError]:
    algorithm = values.get("algorithm")
    if algorithm is None:
        return
    key = values.get("shard_key")
    if algorithm == "global" and key:
        yield ("shard_key", "a global table has no shard key: it is whole on every shard")
    elif algorithm != "global" and "shard_key" in values and not key:
        yield ("shard_key", f"required by the {algorithm} algorithm: the column whose value picks the shard")
    params = None
    if "parameters" in values:
        try:
            params = parse_parameters(algorithm, values["parameters"])
        except ValueError as exc:
            yield ("parameters", str(exc))
    sequence = values.get("sequence_column")
    if not sequence:
        return
    if algorithm == "global":
        yield ("sequence_column", "a global table has no sequence: it is written whole to every shard")
        return
    read_as = "date" if algorithm == "date" else "string" if params and string_keyed(algorithm, params) else ""
    if read_as and key and sequence.lower() == key.lower():
        yield (
            "sequence_column",
            f"{sequence} is the shard key, which the {algorithm} algorithm reads as a {read_as}: a sequence numbers "
            "rows with integers",
        )


def _variable_checks(values: dict[str, Any]) -> Iterator[RowError]:
    if "variable_name" not in values:
        return
    try:
        spec = variable_spec(values["variable_name"])
    except ValueError as exc:
        yield ("variable_name", str(exc))
        return
    if "variable_value" in values:
        try:
            spec.parse(values["variable_value"])
        except ValueError as exc:
            yield ("variable_value", str(exc))


_ROW_CHECKS: dict[type, Callable[[dict[str, Any]], Iterator[RowError]]] = {
    MysqlServer: _server_checks,
    MysqlQueryRule: _rule_checks,
    PgsqlQueryRule: _rule_checks,
    MysqlReplicationHostgroup: _replication_checks,
    PgsqlReplicationHostgroup: _replication_checks,
    MysqlShard: _shard_checks,
    MysqlShardedTable: _sharded_table_checks,
    GlobalVariable: _variable_checks,
}


def _unknown_table(table: str) -> str:
    return f"unknown table {table!r}{did_you_mean(table, TABLES)}"


def validate_row(table: str, row: object) -> tuple[object | None, list[RowError]]:
    """Check one row of ``table`` given as a mapping of column name to value, as in the config document.

    Returns the row object and no errors, or None and every (column, message) error found; the column is ""
    for an error about the whole row. Omitted columns take their defaults. ValueError for an unknown table.
    """
    if table not in TABLES:
        raise ValueError(_unknown_table(table))
    cls = TABLES[table]
    if not isinstance(row, Mapping):
        return None, [("", f"a row must be an object, not {show_value(row)}")]
    columns = _columns(cls)
    errors = [(str(key), f"unknown column{did_you_mean(str(key), columns)}") for key in row if key not in columns]
    values: dict[str, Any] = {}
    for name, column in columns.items():
        if name not in row:
            if column.default is dataclasses.MISSING:
                errors.append((name, "missing required column"))
            else:
                values[name] = column.default
            continue
        convert = _CONVERTERS.get((cls, name), column.convert)
        try:
            values[name] = convert(row[name])
        except ValueError as exc:
            errors.append((name, str(exc)))
    if cls in _ROW_CHECKS:
        errors.extend(_ROW_CHECKS[cls](values))
    if errors:
        return None, errors
    return cls(**values), []


# --- the document -------------------------------------------------------------------------------------------


def _as_row(obj: Any) -> dict[str, Any]:
    """A row object as a document row: every column, booleans as 0/1 as ProxySQL shows them."""
    row = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        row[f.name] = int(value) if isinstance(value, bool) else value
    return row


def _where(table: str, index: int, row: object) -> str:
    """``table[index] (key=value, ...)`` from the label columns the row has."""
    if not isinstance(row, Mapping):
        return f"{table}[{index}]"
    shown = [f"{c}={show_value(row[c])}" for c in _LABEL_COLUMNS[table] if c in row]
    return f"{table}[{index}] ({', '.join(shown)})" if shown else f"{table}[{index}]"


def _primary_key(table: str) -> Callable[[object], tuple[Any, ...]]:
    columns = UNIQUE_KEYS[table][0]
    return lambda obj: tuple(getattr(obj, c) for c in columns)


@dataclass(frozen=True)
class Config:
    """A validated config: each table's rows (ordered by primary key), the global variables and a checksum.

    Build one with ``parse_config``. ``warnings`` are remarks about a valid config and take no part in
    equality; ``checksum`` is the sha256 of the canonical JSON of ``to_document()``, so configs that differ
    only in key order, row order or spelled-out defaults have the same checksum.
    """

    mysql_servers: tuple[MysqlServer, ...] = ()
    mysql_users: tuple[MysqlUser, ...] = ()
    mysql_query_rules: tuple[MysqlQueryRule, ...] = ()
    mysql_query_rules_fast_routing: tuple[MysqlQueryRuleFastRouting, ...] = ()
    mysql_replication_hostgroups: tuple[MysqlReplicationHostgroup, ...] = ()
    mysql_shards: tuple[MysqlShard, ...] = ()
    mysql_sharded_tables: tuple[MysqlShardedTable, ...] = ()
    pgsql_servers: tuple[PgsqlServer, ...] = ()
    pgsql_users: tuple[PgsqlUser, ...] = ()
    pgsql_query_rules: tuple[PgsqlQueryRule, ...] = ()
    pgsql_replication_hostgroups: tuple[PgsqlReplicationHostgroup, ...] = ()
    pgsql_forward_listeners: tuple[PgsqlForwardListener, ...] = ()
    variables: Variables = field(default_factory=Variables)
    warnings: tuple[str, ...] = field(default=(), compare=False)
    checksum: str = field(init=False)

    def __post_init__(self) -> None:
        for table in _ROW_TABLES:
            object.__setattr__(self, table, tuple(sorted(getattr(self, table), key=_primary_key(table))))
        canonical = json.dumps(self.to_document(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        object.__setattr__(self, "checksum", hashlib.sha256(canonical.encode()).hexdigest())

    def to_document(self) -> dict[str, list[dict[str, Any]]]:
        """The full document: every table, every column; global_variables holds only the overrides, as text."""
        document = {
            table: [_as_row(obj) for obj in getattr(self, table)]
            for table in _ROW_TABLES
            if table not in _OPTIONAL_TABLES or getattr(self, table)
        }
        document["global_variables"] = self.variables.rows()
        return document

    def hostgroups(self) -> set[int]:
        """Every hostgroup the config mentions: those with servers and those any row refers to."""
        found = {server.hostgroup_id for server in self.mysql_servers}
        for table, columns in _HOSTGROUP_REFERENCES.items():
            for obj in getattr(self, table):
                found.update(getattr(obj, c) for c in columns if getattr(obj, c) is not None)
        return found

    def servers_in(self, hostgroup_id: int) -> tuple[MysqlServer, ...]:
        """The servers of one hostgroup."""
        return tuple(server for server in self.mysql_servers if server.hostgroup_id == hostgroup_id)

    def pgsql_servers_in(self, hostgroup_id: int) -> tuple[PgsqlServer, ...]:
        """The PostgreSQL servers of one (PostgreSQL) hostgroup."""
        return tuple(server for server in self.pgsql_servers if server.hostgroup_id == hostgroup_id)

    def pgsql_user(self, username: str) -> PgsqlUser | None:
        """The active PostgreSQL user clients may log in as with this name, if any."""
        return next((u for u in self.pgsql_users if u.username == username and u.active and u.frontend), None)

    def frontend_user(self, username: str) -> MysqlUser | None:
        """The active user clients may log in as with this name, if any."""
        return next((u for u in self.mysql_users if u.username == username and u.active and u.frontend), None)

    def backend_user(self, username: str) -> MysqlUser | None:
        """The active user the proxy may log in to backends as with this name, if any."""
        return next((u for u in self.mysql_users if u.username == username and u.active and u.backend), None)


# Rows that passed validate_row, per table: (index in the document, row object).
_Rows = dict[str, list[tuple[int, Any]]]


def parse_config(doc: object) -> Config:
    """Validate a config document (a parsed JSON object) into a ``Config``; ConfigError lists every problem."""
    if not isinstance(doc, Mapping):
        raise ConfigError([f"the config document must be a JSON object, not {show_value(doc)}"])
    errors: list[str] = []
    rows: _Rows = {table: [] for table in TABLES}
    for table, table_rows in doc.items():
        if table not in TABLES:
            errors.append(_unknown_table(str(table)))
            continue
        if not isinstance(table_rows, list):
            errors.append(f"{table}: must be a list of row objects, not {show_value(table_rows)}")
            continue
        for index, raw in enumerate(table_rows):
            obj, row_errors = validate_row(table, raw)
            where = _where(table, index, raw)
            errors.extend(f"{where}: {col}: {msg}" if col else f"{where}: {msg}" for col, msg in row_errors)
            if obj is not None:
                rows[table].append((index, obj))
    errors.extend(_key_errors(rows))
    errors.extend(_replication_errors("mysql_replication_hostgroups", rows["mysql_replication_hostgroups"]))
    errors.extend(_replication_errors("pgsql_replication_hostgroups", rows["pgsql_replication_hostgroups"]))
    errors.extend(_sharding_errors(rows))
    if errors:
        raise ConfigError(errors)
    variables = Variables.from_rows(obj for _, obj in rows["global_variables"])
    errors.extend(_tls_errors(rows["global_variables"], variables))
    errors.extend(_listener_errors(rows["pgsql_forward_listeners"], variables))
    if errors:
        raise ConfigError(errors)
    return Config(
        mysql_servers=tuple(obj for _, obj in rows["mysql_servers"]),
        mysql_users=tuple(obj for _, obj in rows["mysql_users"]),
        mysql_query_rules=tuple(obj for _, obj in rows["mysql_query_rules"]),
        mysql_query_rules_fast_routing=tuple(obj for _, obj in rows["mysql_query_rules_fast_routing"]),
        mysql_replication_hostgroups=tuple(obj for _, obj in rows["mysql_replication_hostgroups"]),
        mysql_shards=tuple(obj for _, obj in rows["mysql_shards"]),
        mysql_sharded_tables=tuple(obj for _, obj in rows["mysql_sharded_tables"]),
        pgsql_servers=tuple(obj for _, obj in rows["pgsql_servers"]),
        pgsql_users=tuple(obj for _, obj in rows["pgsql_users"]),
        pgsql_query_rules=tuple(obj for _, obj in rows["pgsql_query_rules"]),
        pgsql_replication_hostgroups=tuple(obj for _, obj in rows["pgsql_replication_hostgroups"]),
        pgsql_forward_listeners=tuple(obj for _, obj in rows["pgsql_forward_listeners"]),
        variables=variables,
        warnings=tuple(_warnings(rows, variables)),
    )


def _key_errors(rows: _Rows) -> Iterator[str]:
    """A row whose unique key an earlier row already has."""
    for table, keys in UNIQUE_KEYS.items():
        for columns in keys:
            first: dict[tuple[Any, ...], int] = {}
            for index, obj in rows[table]:
                row = _as_row(obj)
                key = tuple(row[c] for c in columns)
                if key in first:
                    shown = ", ".join(f"{c}={show_value(row[c])}" for c in columns)
                    yield f"{_where(table, index, row)}: duplicate {shown}, already in {table}[{first[key]}]"
                else:
                    first[key] = index


def _replication_errors(
    table: str, pairs: list[tuple[int, MysqlReplicationHostgroup]] | list[tuple[int, PgsqlReplicationHostgroup]]
) -> Iterator[str]:
    """A hostgroup that is the writer of one pair and the reader of another."""
    writers: dict[int, int] = {}
    readers: dict[int, int] = {}
    for index, pair in pairs:
        where = _where(table, index, _as_row(pair))
        writer, reader = pair.writer_hostgroup, pair.reader_hostgroup
        if writer in readers:
            yield f"{where}: writer_hostgroup: {writer} is the reader_hostgroup of {table}[{readers[writer]}]"
        if reader in writers:
            yield f"{where}: reader_hostgroup: {reader} is the writer_hostgroup of {table}[{writers[reader]}]"
        writers.setdefault(writer, index)
        readers.setdefault(reader, index)


def _sharding_errors(rows: _Rows) -> Iterator[str]:
    """Shard groups whose shards are not numbered 0 to N-1, sharded tables naming a group that does not exist,
    algorithm parameters that do not fit their group (a shard number outside it, buckets left to no shard), and two
    tables that would be one on a server (``_same_table``)."""
    groups: dict[str, set[int]] = {}
    for _, shard in rows["mysql_shards"]:
        groups.setdefault(shard.shard_group, set()).add(shard.shard)
    for name, numbers in sorted(groups.items()):
        missing = sorted(set(range(max(numbers) + 1)) - numbers)
        if missing:
            shown = ", ".join(str(n) for n in missing[:5]) + (" ..." if len(missing) > 5 else "")
            yield (
                f"mysql_shards: shard group {name!r} has shards up to {max(numbers)} but not {shown} "
                "(number them 0 to N-1)"
            )
    for index, table in rows["mysql_sharded_tables"]:
        where = _where("mysql_sharded_tables", index, _as_row(table))
        if table.shard_group not in groups:
            known = f" (groups: {', '.join(sorted(groups))})" if groups else " (mysql_shards has none)"
            yield f"{where}: shard_group: no shard group {table.shard_group!r} in mysql_shards{known}"
            continue
        try:
            build(table.algorithm, table.parameters, len(groups[table.shard_group]))
        except ValueError as exc:
            yield f"{where}: parameters: {exc}"
    yield from _same_table(rows)


def _same_table(rows: _Rows) -> Iterator[str]:
    """Two sharded tables that a shard's physical schema would make one table on a hostgroup: a shard keeps every
    logical schema of its group in its physical schema, so ``a.t`` and ``b.t`` of one group, or ``a.t`` kept in
    physical schema ``b`` beside another group's ``b.t`` on the same hostgroup, would be one table there."""
    shards: dict[str, list[MysqlShard]] = {}
    for _, shard in rows["mysql_shards"]:
        shards.setdefault(shard.shard_group, []).append(shard)
    held: dict[tuple[int, str, str], tuple[int, str]] = {}  # (hostgroup, schema, table) -> the table kept there
    for index, table in rows["mysql_sharded_tables"]:
        name = f"{table.schemaname}.{table.tablename}"
        for shard in shards.get(table.shard_group, ()):
            schema = shard.physical_schema or table.schemaname
            spot = (shard.hostgroup_id, schema.lower(), table.tablename.lower())
            first = held.setdefault(spot, (index, name))
            if first[1].lower() != name.lower():
                yield (
                    f"{_where('mysql_sharded_tables', index, _as_row(table))}: {name} would be the same table as "
                    f"mysql_sharded_tables[{first[0]}] {first[1]} on hostgroup {shard.hostgroup_id} (both in its "
                    f"schema {schema}): give the shards other physical schemas, or rename one table"
                )
                break


def _tls_errors(rows: list[tuple[int, GlobalVariable]], variables: Variables) -> Iterator[str]:
    """A TLS certificate named without its key, or a key without its certificate."""
    where = {row.variable_name: index for index, row in rows}
    for pair in TLS_FILE_PAIRS:
        for name, other in (pair, pair[::-1]):
            if variables[name] and not variables[other]:
                yield (f"global_variables[{where[name]}] {name}: set without {other}; set both (PEM files) or neither")


def listener_port_error(port: int, variables: Variables) -> str | None:
    """Why a forwarding listener may not take ``port`` on a node run with ``variables``: it is the port of the
    MySQL listener (any of ``mysql-interfaces``), of the PostgreSQL listener (``pgsql-interfaces``) or of the admin
    endpoint; None when it may."""
    taken = {variables.integer("admin-restapi_port"): "admin-restapi_port"}
    for name in ("mysql-interfaces", "pgsql-interfaces"):
        for part in variables.text(name).split(";"):
            _, sep, text = part.strip().rpartition(":")
            if sep and text.isdigit():
                taken.setdefault(int(text), name)
    if port in taken:
        return f"{port} is the port of {taken[port]}; give the listener a port of its own"
    return None


def _listener_errors(rows: list[tuple[int, PgsqlForwardListener]], variables: Variables) -> Iterator[str]:
    """A forwarding listener on the port of the MySQL or PostgreSQL listener or of the admin endpoint."""
    for index, listener in rows:
        error = listener_port_error(listener.port, variables)
        if error is not None:
            yield f"{_where('pgsql_forward_listeners', index, _as_row(listener))}: port: {error}"


def _warnings(rows: _Rows, variables: Variables) -> Iterator[str]:
    """Hostgroups referred to that have no servers, rules that can never match, users with an empty password, and
    variables set that ProxyFleet does not act on."""
    served = {server.hostgroup_id for _, server in rows["mysql_servers"]}
    referrers: dict[int, list[str]] = {}
    for table, columns in _HOSTGROUP_REFERENCES.items():
        for index, obj in rows[table]:
            for column in columns:
                hostgroup = getattr(obj, column)
                if hostgroup is not None and hostgroup not in served:
                    referrers.setdefault(hostgroup, []).append(f"{_label(table, index, obj)} {column}")
    for hostgroup in sorted(referrers):
        yield f"hostgroup {hostgroup} has no servers (referenced by {'; '.join(referrers[hostgroup])})"
    pgsql_served = {server.hostgroup_id for _, server in rows["pgsql_servers"]}
    for index, pg_rule in rows["pgsql_query_rules"]:
        ignored = [c for c in PGSQL_RULE_NOT_ACTED_ON if getattr(pg_rule, c) is not None]
        if ignored:
            yield (
                f"{_label('pgsql_query_rules', index, pg_rule)}: the PostgreSQL proxy does not act on "
                f"{', '.join(ignored)} yet (it routes, rewrites, blocks, caches and times out)"
            )
    for index, pg_user in rows["pgsql_users"]:
        if pg_user.active and pg_user.default_hostgroup not in pgsql_served:
            yield (
                f"{_label('pgsql_users', index, pg_user)}: pgsql_servers has no server in its default_hostgroup "
                f"{pg_user.default_hostgroup}: its queries will fail"
            )
    for index, listener in rows["pgsql_forward_listeners"]:
        if listener.active and listener.hostgroup_id not in pgsql_served:
            yield (
                f"{_label('pgsql_forward_listeners', index, listener)}: pgsql_servers has no server in hostgroup "
                f"{listener.hostgroup_id}: its connections will be refused"
            )
    rule_index = {rule.rule_id: index for index, rule in rows["mysql_query_rules"]}
    for later, earlier in shadowed_rules([rule for _, rule in rows["mysql_query_rules"]]):
        yield (
            f"mysql_query_rules[{rule_index[later]}] rule_id={later} can never match: rule_id={earlier} (apply=1) "
            "matches every query it would, first"
        )
    if not rows["mysql_users"]:
        yield "mysql_users is empty: no client can log in"
    if not rows["mysql_servers"]:
        yield "mysql_servers is empty: every query will fail (no hostgroup has a server)"
    for index, user in rows["mysql_users"]:
        if user.password == "":
            yield f"{_label('mysql_users', index, user)} has an empty password"
        if user.use_ssl and not variables.flag("mysql-have_ssl"):
            yield f"{_label('mysql_users', index, user)} has use_ssl=1 and mysql-have_ssl is false: it can never log in"
    for index, variable in rows["global_variables"]:
        name = variable.variable_name
        if name in NOT_HONOURED and variables[name] != VARIABLES[name].default:
            yield (
                f"global_variables[{index}] {name}: accepted for ProxySQL compatibility, but ProxyFleet does not act "
                f"on it (it behaves as with the default, {show_value(VARIABLES[name].default)})"
            )


#: pgsql_query_rules outputs the PostgreSQL proxy does not act on yet.
PGSQL_RULE_NOT_ACTED_ON = (
    "cache_timeout",
    "reconnect",
    "retries",
    "delay",
    "next_query_flagIN",
    "mirror_flagOUT",
    "mirror_hostgroup",
    "OK_msg",
    "sticky_conn",
    "multiplex",
    "log",
)


def _label(table: str, index: int, obj: object) -> str:
    """``table[index] key=value`` naming a valid row in a warning."""
    shown = ", ".join(f"{c}={show_value(getattr(obj, c))}" for c in _LABEL_COLUMNS[table])
    return f"{table}[{index}] {shown}"


def load_config_file(path: str | os.PathLike[str]) -> Config:
    """Read and parse a JSON config file; ConfigError names the file (and the line and column of bad JSON)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read the config: {exc}"]) from None
    try:
        doc = read_json(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]) from None
    except DuplicateKey as exc:
        raise ConfigError([f"{path}: invalid config: {exc}"]) from None
    try:
        return parse_config(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {error}" for error in exc.errors) from None

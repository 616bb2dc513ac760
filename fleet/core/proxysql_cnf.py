"""Import of a ProxySQL ``proxysql.cnf`` (libconfig syntax): the migration path for ProxySQL users.

``parse_libconfig`` reads the file into Python values (a hand-written recursive descent parser: settings with ``=``
or ``:``, groups ``{}``, lists ``()``, arrays ``[]``, strings, integers, floats, booleans, ``#``, ``//`` and
``/* */`` comments). ``cnf_to_document`` maps ProxySQL's sections onto the config document: ``mysql_servers``
(``address``/``hostgroup`` as ProxySQL's cnf spells them), ``mysql_users``, ``mysql_query_rules``,
``mysql_query_rules_fast_routing``,
``mysql_replication_hostgroups``, ``mysql_variables`` (``threads=4`` becomes ``mysql-threads``), and ProxySQL 3.0's
``pgsql_servers``, ``pgsql_users`` (their ``pool_mode``, ProxyFleet's own column, is transaction unless the row sets
it), ``pgsql_query_rules`` (their columns as they are: ``database`` where MySQL's rules have ``schemaname``),
``pgsql_replication_hostgroups`` and ``pgsql_variables`` (``monitor_username`` becomes ``pgsql-monitor_username``).
What ProxyFleet has no place for (``admin_variables``, the scheduler, unknown variables or columns) is left out with
a note naming its line. Every error names its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fleet.core import publishing
from fleet.core.drafts import Actor
from fleet.core.models import Cluster
from proxyapp.config.document import Config, ConfigError, parse_config, table_columns
from proxyapp.config.variables import VARIABLES

#: Sections holding rows of a table, each a list of groups.
TABLE_SECTIONS = (
    "mysql_servers",
    "mysql_users",
    "mysql_query_rules",
    "mysql_query_rules_fast_routing",
    "mysql_replication_hostgroups",
    "pgsql_servers",
    "pgsql_users",
    "pgsql_query_rules",
    "pgsql_replication_hostgroups",
)
#: Sections of global variables: section -> the prefix of its variables' names.
VARIABLE_SECTIONS = {"mysql_variables": "mysql-", "pgsql_variables": "pgsql-"}
#: Names ProxySQL's cnf accepts for a column besides the column's own.
COLUMN_ALIASES = {
    "mysql_servers": {"address": "hostname", "hostgroup": "hostgroup_id"},
    "pgsql_servers": {"address": "hostname", "hostgroup": "hostgroup_id"},
}
IGNORED_SECTIONS = {"admin_variables": "the admin interface is ProxyFleet's own (admin address, REST API)"}
#: Sections ProxyFleet does not take whose loss changes what the proxy does (routing, failover, who may connect,
#: scripts it runs): an import that would drop one is refused unless forced, so a migration never changes routing
#: without the person saying so.
BEHAVIOUR_SECTIONS = frozenset(
    {
        "mysql_galera_hostgroups",
        "mysql_group_replication_hostgroups",
        "mysql_aws_aurora_hostgroups",
        "mysql_hostgroup_attributes",
        "mysql_firewall_whitelist_rules",
        "mysql_firewall_whitelist_users",
        "mysql_firewall_whitelist_sqli_fingerprints",
        "mysql_ldap_mapping",
        "proxysql_servers",
        "scheduler",
        "restapi_routes",
        "pgsql_hostgroup_attributes",
    }
)
#: The note on imported pgsql_servers: how clients reach them in ProxyFleet.
PGSQL_SERVERS_NOTE = (
    "pgsql_servers imported: clients reach them as pgsql_users on the PostgreSQL listener (pgsql-interfaces), "
    "or whole connections through pgsql_forward_listeners"
)
#: The note on imported pgsql_users: ProxySQL has no pool_mode, ProxyFleet pools per transaction by default.
PGSQL_USERS_NOTE = (
    "pgsql_users imported with pool_mode transaction (ProxyFleet's own column: a server connection per transaction, "
    "as PgBouncer's transaction pooling) unless a row sets it; set session for clients that keep session state"
)


class CnfError(ConfigError):
    """A ``proxysql.cnf`` that cannot be read; the message names the line."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__([f"proxysql.cnf line {line}: {message}"])


class Group(dict[str, Any]):
    """A libconfig group (``{ name = value ... }``) remembering the line it starts on and each setting's line."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.lines: dict[str, int] = {}


@dataclass
class CnfImport:
    """A ``proxysql.cnf`` mapped onto a config document, with notes on what was left out and where rows came from."""

    document: dict[str, list[dict[str, Any]]]
    notes: list[str] = field(default_factory=list)
    #: Notes about sections whose loss changes behaviour (``BEHAVIOUR_SECTIONS``): the import needs ``force``.
    dropped: list[str] = field(default_factory=list)
    #: (table, row index in the document) -> the cnf line the row comes from.
    lines: dict[tuple[str, int], int] = field(default_factory=dict)
    #: The variable sections the file holds (``VARIABLE_SECTIONS``).
    sections: set[str] = field(default_factory=set)

    def over(self, draft: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
        """The document the import makes of ``draft``: the tables the file holds replaced, the others kept, and the
        variables of the sections it holds replaced, the others kept (after the file's, so that row indexes still
        locate); and a note per table kept with rows."""
        document = {table: self.document.get(table, rows) for table, rows in draft.items()}
        replaced = tuple(VARIABLE_SECTIONS[section] for section in self.sections)
        kept_variables = [row for row in draft["global_variables"] if not row["variable_name"].startswith(replaced)]
        document["global_variables"] = self.document.get("global_variables", []) + kept_variables
        kept = {table: len(rows) for table, rows in draft.items() if table not in self.document and rows}
        kept["global_variables"] = len(kept_variables)
        notes = [
            f"{table}: the draft's {count} row{'s' if count != 1 else ''} kept (the file has none of this table)"
            for table, count in kept.items()
            if count and table != "global_variables"
        ]
        if kept_variables:
            names = ", ".join(row["variable_name"] for row in kept_variables)
            notes.append(f"global_variables: the draft's {names} kept (the file does not set them)")
        return document, notes

    def locate(self, error: str) -> str:
        """``error`` (from validating the document) prefixed with the cnf line of the row it names."""
        match = re.match(r"(\w+)\[(\d+)\]", error)
        line = self.lines.get((match.group(1), int(match.group(2)))) if match else None
        return f"proxysql.cnf line {line}: {error}" if line is not None else error


# --- the libconfig parser -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*")
  | (?P<float>[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+)
  | (?P<hex>0[xX][0-9A-Fa-f]+L{0,2})
  | (?P<int>[-+]?[0-9]+L{0,2})
  | (?P<name>[A-Za-z*][-A-Za-z0-9_*]*)
  | (?P<punct>[=:;,{}()\[\]])
  | (?P<include>@include\b)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t", "f": "\f"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> list[_Token]:
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CnfError(line, _unexpected(text, pos))
        kind = match.lastgroup or ""
        if kind == "include":
            raise CnfError(line, "@include is not supported; put the included settings in the file")
        if kind not in ("space", "comment"):
            tokens.append(_Token(kind, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    tokens.append(_Token("end", "end of file", line))
    return tokens


def _unexpected(text: str, pos: int) -> str:
    if text[pos] == '"':
        return "unterminated string (a string ends on the line it starts)"
    if text.startswith("/*", pos):
        return "unterminated /* comment"
    return f"unexpected character {text[pos]!r}"


def _unquote(token: _Token) -> str:
    body, out, i = token.text[1:-1], [], 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
        elif body[i + 1] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        elif body[i + 1] == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[i + 2 : i + 4]):
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            raise CnfError(token.line, f"unknown escape '\\{body[i + 1]}' in a string")
    return "".join(out)


class _Parser:
    """Recursive descent over the token list: one method per grammar rule."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def expect(self, text: str, after: str) -> None:
        if self.token.text != text or self.token.kind != "punct":
            raise CnfError(self.token.line, f"expected '{text}' {after}, got {self._shown()}")
        self.pos += 1

    def _shown(self) -> str:
        return self.token.text if self.token.kind == "end" else repr(self.token.text)

    def settings(self, group: Group, closing: str | None) -> Group:
        """``name = value;`` settings until ``closing`` (None: the end of the file)."""
        while not (self.token.kind == "end" if closing is None else self.token.text == closing):
            if self.token.kind == "end":
                raise CnfError(self.token.line, f"missing '{closing}' to close the group opened on line {group.line}")
            if self.token.kind != "name":
                raise CnfError(self.token.line, f"expected a setting name, got {self._shown()}")
            name = self.take()
            if name.text in group:
                raise CnfError(name.line, f"{name.text!r} is already set on line {group.lines[name.text]}")
            if self.token.text not in ("=", ":"):
                raise CnfError(self.token.line, f"expected '=' or ':' after {name.text!r}, got {self._shown()}")
            self.pos += 1
            group[name.text] = self.value()
            group.lines[name.text] = name.line
            if self.token.text in (";", ","):
                self.pos += 1
        if closing is not None:
            self.pos += 1
        return group

    def value(self) -> Any:
        """A scalar, an array ``[...]``, a list ``(...)`` or a group ``{...}``."""
        token = self.token
        if token.text == "{":
            self.pos += 1
            return self.settings(Group(token.line), "}")
        if token.text in ("(", "["):
            self.pos += 1
            return self.sequence(token, ")" if token.text == "(" else "]")
        return self.scalar()

    def sequence(self, opening: _Token, closing: str) -> list[Any]:
        items: list[Any] = []
        while self.token.text != closing:
            if self.token.kind != "end":
                items.append(self.value() if closing == ")" else self.scalar())
            if self.token.kind == "end":
                raise CnfError(self.token.line, f"missing '{closing}' to close the list opened on line {opening.line}")
            if self.token.text == ",":
                self.pos += 1
            elif self.token.text != closing:
                raise CnfError(self.token.line, f"expected ',' or '{closing}' in a list, got {self._shown()}")
        self.pos += 1
        return items

    def scalar(self) -> Any:
        token = self.take()
        if token.kind == "string":
            text = _unquote(token)
            while self.token.kind == "string":  # adjacent strings are concatenated
                text += _unquote(self.take())
            return text
        if token.kind == "int":
            return int(token.text.rstrip("L"))
        if token.kind == "hex":
            return int(token.text.rstrip("L"), 16)
        if token.kind == "float":
            return float(token.text)
        if token.kind == "name" and token.text.lower() in ("true", "false"):
            return token.text.lower() == "true"
        shown = token.text if token.kind == "end" else repr(token.text)
        raise CnfError(token.line, f"expected a value (a string, a number, true or false), got {shown}")


def parse_libconfig(text: str) -> Group:
    """The settings of a libconfig file as a ``Group``; CnfError names the line of a syntax error."""
    return _Parser(text).settings(Group(1), None)


# --- proxysql.cnf to the config document --------------------------------------------------------------------


def cnf_to_document(text: str) -> CnfImport:
    """Map a ``proxysql.cnf`` onto a config document (not validated yet: see ``import_cnf``)."""
    cnf = parse_libconfig(text)
    result = CnfImport(document={})
    for name, value in cnf.items():
        line = cnf.lines[name]
        if name in TABLE_SECTIONS:
            _table_rows(result, name, value, line)
        elif name in VARIABLE_SECTIONS:
            _variables(result, name, value, line)
        elif name in IGNORED_SECTIONS:
            result.notes.append(f"line {line}: {name} not imported: {IGNORED_SECTIONS[name]}")
        elif name in BEHAVIOUR_SECTIONS:
            note = f"line {line}: {name} not imported: ProxyFleet has no such table, and without it routing changes"
            result.notes.append(note)
            result.dropped.append(note)
        else:
            result.notes.append(f"line {line}: {name} not imported: ProxyFleet has no such table or setting")
    if result.document.get("pgsql_servers"):
        result.notes.append(f"line {cnf.lines['pgsql_servers']}: {PGSQL_SERVERS_NOTE}")
    if result.document.get("pgsql_users"):
        result.notes.append(f"line {cnf.lines['pgsql_users']}: {PGSQL_USERS_NOTE}")
    return result


def _table_rows(result: CnfImport, table: str, rows: Any, line: int) -> None:
    if not isinstance(rows, list):
        raise CnfError(line, f"{table} must be a list of groups: {table} = ( {{ ... }}, ... )")
    columns = table_columns(table)
    aliases = COLUMN_ALIASES.get(table, {})
    result.document[table] = []
    for item in rows:
        if not isinstance(item, Group):
            raise CnfError(line, f"{table}: each row must be a group {{ ... }}, not {item!r}")
        row: dict[str, Any] = {}
        for key, value in item.items():
            column = aliases.get(key, key)
            if column not in columns:
                result.notes.append(
                    f"line {item.lines[key]}: {table}.{key} not imported: ProxyFleet has no such column"
                )
            elif column in row:
                raise CnfError(item.lines[key], f"{table}: {key!r} sets {column}, which this row already sets")
            else:
                row[column] = value
        result.lines[(table, len(result.document[table]))] = item.line
        result.document[table].append(row)


def _variables(result: CnfImport, section: str, group: Any, line: int) -> None:
    if not isinstance(group, Group):
        raise CnfError(line, f"{section} must be a group: {section} = {{ threads = 4 ... }}")
    result.sections.add(section)
    rows = result.document.setdefault("global_variables", [])
    for key, value in group.items():
        name = f"{VARIABLE_SECTIONS[section]}{key}"
        if name not in VARIABLES:
            result.notes.append(f"line {group.lines[key]}: {section}.{key} not imported: ProxyFleet has no {name}")
            continue
        if isinstance(value, list | Group):
            raise CnfError(group.lines[key], f"{section}.{key} must be a single value")
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        result.lines[("global_variables", len(rows))] = group.lines[key]
        rows.append({"variable_name": name, "variable_value": text})


def import_cnf(cluster: Cluster, text: str, user: Actor, *, force: bool = False) -> tuple[Config, list[str]]:
    """Replace the tables (and variable sections) of ``cluster``'s draft that a ``proxysql.cnf`` holds with its
    rows, keeping the others (a MySQL-only file keeps the draft's PostgreSQL tables and shards); returns the new
    draft's config and the notes on what was left out and what was kept. ConfigError (each message naming the cnf
    line) and nothing changes when the file is refused, or when it has sections whose loss changes behaviour
    (``BEHAVIOUR_SECTIONS``) and ``force`` is not given."""
    mapped = cnf_to_document(text)
    document, kept = mapped.over(publishing.draft_document(cluster))
    if mapped.dropped and not force:
        errors = list(mapped.dropped)
        try:
            parse_config(document)
        except ConfigError as error:  # say everything at once
            errors += [mapped.locate(message) for message in error.errors]
        raise ConfigError([*errors, "import it with force (--force, or the form's checkbox) to drop them"])
    try:
        config = publishing.import_document(cluster, document, user)
    except ConfigError as error:
        raise ConfigError(mapped.locate(message) for message in error.errors) from None
    return config, mapped.notes + kept

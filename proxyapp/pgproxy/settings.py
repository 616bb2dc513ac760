"""What a PostgreSQL client's statements do to its session, as transaction pooling must know it: the settings it
SETs (replayed on whichever server connection its next transaction gets) and what pins the session to one server
connection for good (a LISTEN, a temporary table, a session advisory lock, a text PREPARE, a cursor WITH HOLD, a
role change, a SET the proxy cannot read, a ``set_config`` that outlasts its transaction).

Read from the query text, no server round trip. A SET inside a transaction counts once the transaction ends without
a ROLLBACK. ``SET LOCAL`` and ``set_config(..., true)`` last one transaction and need nothing.
"""

from __future__ import annotations

import re

#: Startup parameters that are not settings (they choose the connection, or carry options read apart).
NOT_SETTINGS = frozenset({"user", "database", "options", "replication"})

# Matched on the statement stripped of surrounding blanks and its final ";" (``_bare``): no pattern backtracks.
_SET = re.compile(
    r"SET\s+(?:SESSION\s+)?(?!LOCAL\b)(?P<name>[A-Za-z_][A-Za-z0-9_.]*)\s*(?:=|\bTO\b)\s*(?P<value>.+)\Z",
    re.IGNORECASE | re.DOTALL,
)
_SET_TIME_ZONE = re.compile(r"SET\s+(?:SESSION\s+)?TIME\s+ZONE\s+(?P<value>.+)\Z", re.IGNORECASE | re.DOTALL)
_SET_NAMES = re.compile(r"SET\s+(?:SESSION\s+)?NAMES\s+(?P<value>.+)\Z", re.IGNORECASE | re.DOTALL)
_RESET = re.compile(r"RESET\s+(?P<name>ALL|[A-Za-z_][A-Za-z0-9_.]*)\Z", re.IGNORECASE)
_STARTS_SET = re.compile(r"\s*(?:SET|RESET)\b", re.IGNORECASE)
#: How every statement that changes a setting begins.
_CHANGES = re.compile(r"\s*(?:SET|RESET|DISCARD)\b", re.IGNORECASE)
_SET_LOCAL = re.compile(r"\s*SET\s+LOCAL\b", re.IGNORECASE)
_ROLE = re.compile(r"\s*SET\s+(?:SESSION\s+|LOCAL\s+)?(?:ROLE|SESSION\s+AUTHORIZATION)\b", re.IGNORECASE)
_PINS = (
    (re.compile(r"\bLISTEN\b", re.IGNORECASE), "LISTEN"),
    (re.compile(r"\bCREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?TEMP(?:ORARY)?\b", re.IGNORECASE), "a temporary table"),
    (re.compile(r"\bpg_(?:try_)?advisory_(?:lock|lock_shared)\s*\(", re.IGNORECASE), "a session advisory lock"),
    (re.compile(r"\A\s*PREPARE\b", re.IGNORECASE), "a text PREPARE"),
    (re.compile(r"\bWITH\s+HOLD\b", re.IGNORECASE), "a cursor WITH HOLD"),
    (re.compile(r"\A\s*LOAD\b", re.IGNORECASE), "LOAD"),
    # set_config(name, value, is_local) lasts the session unless is_local is plainly true
    (re.compile(r"\bset_config\s*\((?![^()]*,\s*true\s*\))", re.IGNORECASE), "set_config(..., false)"),
)
#: What drops every prepared statement of the server connection (and the client's with it).
DROPS_STATEMENTS = re.compile(r"\s*(?:DISCARD\s+(?:ALL|PLANS)|DEALLOCATE\s+(?:PREPARE\s+)?ALL)\b", re.IGNORECASE)
#: DISCARD ALL also resets every setting.
_DISCARD_ALL = re.compile(r"\s*DISCARD\s+ALL\b", re.IGNORECASE)
_DEALLOCATE = re.compile(r"DEALLOCATE\s+(?:PREPARE\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_$]*|\"[^\"]+\")\Z", re.I)

#: A change of one setting: (name, SQL value), None as the value for RESET; name "*" for RESET ALL / DISCARD ALL.
Change = tuple[str, str | None]


def quote_literal(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def startup_settings(parameters: dict[str, str]) -> dict[str, str]:
    """The settings a client's StartupMessage asks for (its ``options``' ``-c name=value`` included), as SQL
    values; ValueError for options the proxy cannot replay."""
    settings = {name.lower(): quote_literal(value) for name, value in parameters.items() if name not in NOT_SETTINGS}
    options = parameters.get("options", "").split()
    i = 0
    while i < len(options):
        option = options[i]
        if option == "-c" and i + 1 < len(options):
            option, i = "-c" + options[i + 1], i + 1
        if option.startswith("--"):
            option = "-c" + option[2:]
        if not option.startswith("-c") or "=" not in option:
            raise ValueError(f"startup option {option!r} is not supported: only -c name=value")
        name, _, value = option[2:].partition("=")
        settings[name.strip().lower().replace("-", "_")] = quote_literal(value)
        i += 1
    return settings


#: Words one of which a statement must hold to pin its session (a cheap first look before the patterns).
_PIN_WORDS = re.compile(r"listen|temp|advisory|prepare|hold|load|set|reset", re.IGNORECASE)


def pin_reason(sql: str) -> str | None:
    """Why running ``sql`` pins the session to its server connection, or None."""
    if _PIN_WORDS.search(sql) is None:
        return None
    if _ROLE.match(sql):
        return "SET ROLE or SESSION AUTHORIZATION"
    for pattern, reason in _PINS:
        if pattern.search(sql):
            return reason
    if _STARTS_SET.match(sql) and not _SET_LOCAL.match(sql) and read_change(sql) is None:
        return "a SET the proxy cannot read"
    return None


def _bare(sql: str) -> str:
    """A statement without surrounding blanks and its final ";"."""
    return sql.strip().removesuffix(";").rstrip()


def read_change(sql: str) -> Change | None:
    """The setting change a statement makes (a single SET, RESET, DISCARD ALL), or None when it makes none the
    proxy can read."""
    if not _CHANGES.match(sql):
        return None
    sql = _bare(sql)
    if ";" in sql:
        return None  # several statements: pin_reason decides
    for pattern, name in ((_SET_TIME_ZONE, "timezone"), (_SET_NAMES, "client_encoding")):
        match = pattern.match(sql)
        if match:
            return name, match["value"]
    match = _SET.match(sql)
    if match:
        return match["name"].lower(), match["value"]
    match = _RESET.match(sql)
    if match:
        name = match["name"].lower()
        return ("*", None) if name == "all" else (name, None)
    if _DISCARD_ALL.match(sql):
        return ("*", None)
    return None


_NAME = r"[A-Za-z_][A-Za-z0-9_$]*|\"[^\"]+\""
_VACATES = re.compile(
    rf"DROP\s+DATABASE\s+(?:IF\s+EXISTS\s+)?(?P<dropped>{_NAME})"
    rf"|ALTER\s+DATABASE\s+(?P<altered>{_NAME})\s+(?:RENAME\s|SET\s+TABLESPACE\s)",
    re.IGNORECASE,
)


def vacated_database(sql: str) -> str | None:
    """The database that ``sql`` needs no other session connected to (a ``DROP DATABASE``, an ``ALTER DATABASE``'s
    ``RENAME TO`` or ``SET TABLESPACE``), or None."""
    match = _VACATES.match(sql.strip())
    if match is None:
        return None
    name = match["dropped"] or match["altered"]
    return name[1:-1] if name.startswith('"') else name.lower()


def deallocated(sql: str) -> str | None:
    """The statement name a ``DEALLOCATE name`` drops, or None."""
    match = _DEALLOCATE.match(_bare(sql))
    if match is None or match["name"].upper() == "ALL":
        return None
    name = match["name"]
    return name[1:-1] if name.startswith('"') else name.lower()


#: ``EXECUTE name [(args)]``: the name's span is what ``executed`` finds.
_EXECUTE = re.compile(r"\s*EXECUTE\s+(?P<name>[A-Za-z_][A-Za-z0-9_$]*|\"[^\"]+\")", re.IGNORECASE)


def executed(sql: str) -> tuple[str, int, int] | None:
    """The statement name an ``EXECUTE name`` runs and where that name is in ``sql`` (start, end), or None."""
    match = _EXECUTE.match(sql)
    if match is None:
        return None
    name = match["name"]
    return (name[1:-1] if name.startswith('"') else name.lower()), match.start("name"), match.end("name")


def apply_change(settings: dict[str, str], change: Change, defaults: dict[str, str]) -> None:
    """Apply ``change`` to a session's ``settings``; RESET returns a setting to its startup value (``defaults``)."""
    name, value = change
    if name == "*":
        settings.clear()
        settings.update(defaults)
    elif value is None:
        if name in defaults:
            settings[name] = defaults[name]
        else:
            settings.pop(name, None)
    else:
        settings[name] = value


def replay(current: dict[str, str], wanted: dict[str, str]) -> str:
    """The SQL that makes a server connection's settings ``current`` into ``wanted`` ('' when they are equal)."""
    statements = [f"SET {name} = {value}" for name, value in wanted.items() if current.get(name) != value]
    statements += [f"RESET {name}" for name in current if name not in wanted]
    return ";".join(statements)

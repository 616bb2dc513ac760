"""What each statement of a query does: its kind, whether a replica may run it, the session state it changes.

``scan`` runs on every query, so the common case skips tokenizing: a query that opens with SELECT (or INSERT,
UPDATE, DELETE, REPLACE) and contains none of the substrings that could change the answer (``@``, ``;``,
``FOR``, ``LOCK``, ``INTO``, ``FOUND_ROWS``, ``LAST_INSERT_ID`` ...), outside its strings and comments at
least, gets a shared, prebuilt Statement.
Everything else is tokenized once by ``sqllex``, split into statements, and each is read by a handler for its
first keyword followed by one pass over its expressions (user variables, lock functions, locking clauses).

Statements returned by the fast path are shared between calls: callers must treat every Statement as
read-only.

Why one file of this size: one scanner, a handler per first keyword, each a few lines; the handlers share the
token cursor and the ``Statement`` they fill, and the fast path must stay beside the slow one it short-cuts.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from proxyapp.sql.lex import (
    TokenKind,
    Tokens,
    first_word,
    is_compound,
    object_type,
    statement_ranges,
    strip_quoted,
    sys_var_parts,
    tokenize,
    unquote,
    user_var_name,
)


class Kind(enum.Enum):
    """The kind of a statement, as far as routing and session tracking care."""

    SELECT = "SELECT"  # SELECT, WITH ... SELECT, TABLE, VALUES
    WRITE = "WRITE"  # INSERT/UPDATE/DELETE/REPLACE, LOAD DATA/XML, DDL, GRANT/REVOKE
    BEGIN = "BEGIN"  # BEGIN, START TRANSACTION, XA START, COMMIT/ROLLBACK AND CHAIN
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"  # not ROLLBACK TO SAVEPOINT, which is OTHER
    SAVEPOINT = "SAVEPOINT"
    SET = "SET"
    USE = "USE"
    SHOW = "SHOW"  # SHOW, and EXPLAIN/DESCRIBE/DESC
    CALL = "CALL"
    PREPARE = "PREPARE"
    EXECUTE = "EXECUTE"
    DEALLOCATE = "DEALLOCATE"  # DEALLOCATE PREPARE, DROP PREPARE
    LOCK = "LOCK"  # LOCK TABLES/INSTANCE, FLUSH TABLES ... WITH READ LOCK / FOR EXPORT
    UNLOCK = "UNLOCK"
    DO = "DO"
    OTHER = "OTHER"


#: Statements that neither open nor take part in a transaction, autocommit off or on: they need not go to the
#: transaction's hostgroup, and run alone they open none.
TRANSACTION_NEUTRAL = frozenset({Kind.SET, Kind.USE, Kind.SHOW, Kind.COMMIT, Kind.ROLLBACK})


@dataclass(slots=True)
class Statement:
    """One statement's analysis.

    ``session_vars`` holds the session-scope assignments of a SET in order, as (canonical lowercase name,
    the value's SQL text as written), to replay as ``SET name = value``. Special names: 'names' (``SET
    NAMES x [COLLATE y]``), 'character set' (``SET CHARACTER SET x`` / ``SET CHARSET x``), 'session
    transaction' (``SET SESSION TRANSACTION ...``: the characteristics) and 'next transaction' (``SET
    TRANSACTION ...`` without a scope). ``implicit_commit`` follows the MariaDB list (DDL except on
    temporary tables, LOCK TABLES, FLUSH, GRANT/REVOKE, BEGIN/START TRANSACTION, ...); the conditional
    cases (``SET autocommit=1`` when it was 0, ``UNLOCK TABLES`` with tables locked) are the caller's.
    ``unparsable_set`` marks session state the scanner can't track: a SET it could not break into pairs, a
    session value computed from a variable or subquery (it can't be replayed on another connection),
    ``SET ROLE``, and compound statements (``BEGIN NOT ATOMIC``, top-level IF/LOOP/...).
    """

    kind: Kind
    keyword: str
    is_read: bool = False
    locking_read: bool = False
    implicit_commit: bool = False
    session_vars: list[tuple[str, str]] = field(default_factory=list)
    global_set: bool = False
    user_vars_assigned: list[str] = field(default_factory=list)
    uses_user_vars: bool = False
    schema: str | None = None
    temp_tables_created: list[str] = field(default_factory=list)
    tables_dropped: list[str] = field(default_factory=list)
    get_lock: bool = False
    release_lock: bool = False
    lock_tables: bool = False
    unlock_tables: bool = False
    found_rows: bool = False
    plain: bool = field(default=False, compare=False)  # changes no session state (fast-path statements)
    calc_found_rows: bool = False  # SQL_CALC_FOUND_ROWS: the next FOUND_ROWS() must run on the same connection
    sets_last_insert_id: bool = False  # LAST_INSERT_ID(expr): the session's insert id becomes expr
    last_insert_id_only: bool = False
    prepare_name: str | None = None
    deallocate_name: str | None = None
    sql_log_bin: bool | None = None
    unparsable_set: bool = False
    load_local: bool = False


def scan(sql: str) -> list[Statement]:
    """One Statement per statement of ``sql`` (a COM_QUERY text, maybe multi-statement); [] if empty."""
    fast = fast_statement(sql)
    if fast is not None:
        return [fast]
    tokens = tokenize(sql)
    return [_statement(tokens, lo, hi) for lo, hi in statement_ranges(tokens)]


def fast_statement(sql: str) -> Statement | None:
    """The shared Statement of ``sql`` when the fast path answers it (one statement opening with SELECT, INSERT,
    UPDATE, DELETE or REPLACE, with none of its kind's trigger words outside strings and comments); else None.

    It reads only the first word and whether a trigger word (letters, '_', '@', ';') occurs: so it answers the same
    for every text that differs from ``sql`` only in its numbers (``proxyapp.sql.analysis`` relies on that).
    """
    fast = _FAST_PATH.get(first_word(sql))
    if fast is None:
        return None
    statement, triggers = fast
    if not _contains_any(sql.upper(), triggers):
        return statement
    # maybe the triggers are only inside strings or comments: 'bob@example.com'
    if "*/" not in sql and not _contains_any(strip_quoted(sql).upper(), triggers):
        return statement
    return None


def _contains_any(text: str, needles: tuple[str, ...]) -> bool:
    """Whether any of ``needles`` occurs in ``text``."""
    return any(needle in text for needle in needles)  # mypyc compiles this to a plain loop


_SELECT_TRIGGERS = (
    "@",
    ";",
    "FOR",
    "LOCK",
    "INTO",
    "FOUND_ROWS",
    "LAST_INSERT_ID",
    "IDENTITY",
    "NEXTVAL",
    "SETVAL",
    "LASTVAL",
    "ROW_COUNT",
)
_WRITE_TRIGGERS = ("@", ";", "LOCK", "FOUND_ROWS")
_FAST_PATH: dict[str, tuple[Statement, tuple[str, ...]]] = {
    "SELECT": (Statement(Kind.SELECT, "SELECT", is_read=True, plain=True), _SELECT_TRIGGERS),
    **{
        kw: (Statement(Kind.WRITE, kw, plain=True), _WRITE_TRIGGERS) for kw in ("INSERT", "UPDATE", "DELETE", "REPLACE")
    },
}

_WORD = TokenKind.WORD
_QUOTED_IDENT = TokenKind.QUOTED_IDENT
_USER_VAR = TokenKind.USER_VAR
_SYS_VAR = TokenKind.SYS_VAR
_OPERATOR = TokenKind.OPERATOR
_NAME_KINDS = (_WORD, _QUOTED_IDENT)


class _Ctx:
    """A statement being scanned: its tokens ``[lo, hi)``, its keyword's index, and scan bookkeeping."""

    __slots__ = ("analyze", "assigned", "hi", "i", "lo", "t")

    def __init__(self, t: Tokens, lo: int, i: int, hi: int) -> None:
        self.t = t
        self.lo = lo
        self.i = i
        self.hi = hi
        self.analyze = True  # run the expression pass (off for stored program bodies and finished results)
        self.assigned: set[int] = set()  # USER_VAR token indexes a SET assigns (not reads)


def _statement(t: Tokens, lo: int, hi: int) -> Statement:
    """Scan the statement made of tokens ``[lo, hi)``."""
    i = lo
    while t.texts[i] == "(" and i + 1 < hi:  # (SELECT ...) UNION (SELECT ...)
        i += 1
    keyword = t.word(i)
    ctx = _Ctx(t, lo, i, hi)
    if keyword not in ("CREATE", "ALTER") and is_compound(t, lo, hi):
        st = _compound(ctx)
    else:
        st = _HANDLERS.get(keyword, _other)(ctx)
    if ctx.analyze:
        _expressions(ctx, st)
    return st


# ------------------------------------------------------------------------------------------- expressions

_SESSION_BOUND_FUNCTIONS = frozenset(
    {"IS_FREE_LOCK", "IS_USED_LOCK", "LAST_INSERT_ID", "ROW_COUNT", "NEXTVAL", "SETVAL", "LASTVAL"}
)
_SESSION_BOUND_SYS_VARS = frozenset({"identity", "last_insert_id", "warning_count", "error_count"})
_EXPRESSION_WORDS = frozenset(
    {
        "GET_LOCK",
        "RELEASE_LOCK",
        "RELEASE_ALL_LOCKS",
        "FOUND_ROWS",
        "SQL_CALC_FOUND_ROWS",
        "INTO",
        "FOR",
        "LOCK",
        "NEXT",
        "PREVIOUS",
        *_SESSION_BOUND_FUNCTIONS,
    }
)


def _expressions(ctx: _Ctx, st: Statement) -> None:
    """Find user variables, lock and session-bound functions, locking clauses; clear is_read if needed."""
    t, hi = ctx.t, ctx.hi
    kinds, texts = t.kinds, t.texts
    bound = False  # needs the session's own connection
    locking = False
    i = ctx.lo
    while i < hi:
        kind = kinds[i]
        if kind is _USER_VAR and i not in ctx.assigned:  # a SET's targets are recorded already
            if t.text(i + 1) == ":=":
                st.user_vars_assigned.append(user_var_name(texts[i]))
            else:
                st.uses_user_vars = True
        elif kind is _SYS_VAR:
            bound = bound or sys_var_parts(texts[i])[1] in _SESSION_BOUND_SYS_VARS
        elif kind is _WORD and (word := texts[i].upper()) in _EXPRESSION_WORDS:
            call = t.text(i + 1) == "("
            following = t.word(i + 1)
            if word == "SQL_CALC_FOUND_ROWS" or (word == "FOUND_ROWS" and call):
                st.found_rows = bound = True
                st.calc_found_rows = st.calc_found_rows or word == "SQL_CALC_FOUND_ROWS"
            elif word == "GET_LOCK" and call:
                st.get_lock = bound = True
            elif word in ("RELEASE_LOCK", "RELEASE_ALL_LOCKS") and call:
                st.release_lock = bound = True
            elif word in _SESSION_BOUND_FUNCTIONS and call:
                bound = True
                if word == "LAST_INSERT_ID" and t.text(i + 2) != ")":
                    st.sets_last_insert_id = True
            elif word == "INTO":  # INTO @a, @b assigns; INTO OUTFILE/DUMPFILE writes a file
                bound = bound or following in ("OUTFILE", "DUMPFILE")
                j = i + 1
                while j < hi and kinds[j] is _USER_VAR:
                    st.user_vars_assigned.append(user_var_name(texts[j]))
                    j += 2 if t.text(j + 1) == "," else 1
                i = j - 1
            elif (word == "FOR" and following in ("UPDATE", "SHARE")) or (
                word == "LOCK" and following == "IN" and t.word(i + 2) == "SHARE"
            ):
                locking = True
            elif word in ("NEXT", "PREVIOUS") and following == "VALUE" and t.word(i + 2) == "FOR":
                bound = True
        i += 1
    if locking and st.kind is Kind.SELECT:
        st.locking_read = True
    if bound or locking or st.uses_user_vars or st.user_vars_assigned:
        st.is_read = False


# ------------------------------------------------------------------------------------------------ helpers


def _name(t: Tokens, j: int, hi: int) -> tuple[str, int] | None:
    """A possibly qualified name at ``j`` (``db.t``, backquotes removed) and the index after it."""
    if j >= hi or t.kinds[j] not in _NAME_KINDS:
        return None
    parts = [unquote(t.texts[j])]
    j += 1
    while j + 1 < hi and t.texts[j] == "." and t.kinds[j + 1] in _NAME_KINDS:
        parts.append(unquote(t.texts[j + 1]))
        j += 2
    return ".".join(parts), j


def _skip_words(t: Tokens, j: int, *words: str) -> int:
    """``j`` moved past the words given, if they appear there in order (e.g. IF NOT EXISTS)."""
    for k, word in enumerate(words):
        if t.word(j + k) != word:
            return j
    return j + len(words)


def _find_word(t: Tokens, lo: int, hi: int, word: str, depth0: bool = False) -> int:
    """The index of ``word`` in ``[lo, hi)`` (outside parentheses if ``depth0``), or -1."""
    depth = 0
    for j in range(lo, hi):
        text = t.texts[j]
        if text == "(" or text == ")":
            depth += 1 if text == "(" else -1
        elif (depth == 0 or not depth0) and t.kinds[j] is _WORD and text.upper() == word:
            return j
    return -1


def _last_insert_id_only(t: Tokens, j: int, hi: int) -> bool:
    """Whether tokens ``[j, hi)`` are ``LAST_INSERT_ID()``, ``@@identity`` or ``@@last_insert_id`` [[AS] alias]."""
    if t.word(j) == "LAST_INSERT_ID" and t.text(j + 1) == "(" and t.text(j + 2) == ")":
        j += 3
    elif j < hi and t.kinds[j] is _SYS_VAR:
        scope, name = sys_var_parts(t.texts[j])
        if scope not in (None, "session", "local") or name not in ("identity", "last_insert_id"):
            return False
        j += 1
    else:
        return False
    if t.word(j) == "AS":
        j += 1
        if j >= hi:
            return False
    if j < hi and t.kinds[j] in (_WORD, _QUOTED_IDENT, TokenKind.STRING):
        j += 1
    return j == hi


# ----------------------------------------------------------------------------------------------- handlers


def _other(ctx: _Ctx) -> Statement:
    return Statement(Kind.OTHER, ctx.t.word(ctx.i))


def _select(ctx: _Ctx) -> Statement:
    st = Statement(Kind.SELECT, "SELECT", is_read=True)
    st.last_insert_id_only = ctx.i == ctx.lo and _last_insert_id_only(ctx.t, ctx.i + 1, ctx.hi)
    return st


def _table_or_values(ctx: _Ctx) -> Statement:
    return Statement(Kind.SELECT, ctx.t.word(ctx.i), is_read=True)


_CTE_BODIES = frozenset({"SELECT", "TABLE", "VALUES", "INSERT", "UPDATE", "DELETE", "REPLACE"})


def _with(ctx: _Ctx) -> Statement:
    t = ctx.t
    depth = 0
    for j in range(ctx.i + 1, ctx.hi):
        text = t.texts[j]
        if text == "(" or text == ")":
            depth += 1 if text == "(" else -1
        elif depth == 0 and t.word(j) in _CTE_BODIES:
            if t.word(j) in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
                return Statement(Kind.WRITE, "WITH")
            break
    return Statement(Kind.SELECT, "WITH", is_read=True)


def _write(ctx: _Ctx) -> Statement:
    return Statement(Kind.WRITE, ctx.t.word(ctx.i))


def _ddl(ctx: _Ctx) -> Statement:
    return Statement(Kind.WRITE, ctx.t.word(ctx.i), implicit_commit=True)


def _admin(ctx: _Ctx) -> Statement:
    return Statement(Kind.OTHER, ctx.t.word(ctx.i), implicit_commit=True)


def _load(ctx: _Ctx) -> Statement:
    t, i = ctx.t, ctx.i
    if t.word(i + 1) not in ("DATA", "XML"):  # LOAD INDEX INTO CACHE
        return Statement(Kind.OTHER, "LOAD", implicit_commit=True)
    infile = _find_word(t, i + 2, ctx.hi, "INFILE")
    return Statement(Kind.WRITE, "LOAD", load_local=_find_word(t, i + 2, infile, "LOCAL") >= 0)


def _create(ctx: _Ctx) -> Statement:
    t, hi = ctx.t, ctx.hi
    j = object_type(t, ctx.i + 1, hi)
    what = t.word(j)
    if what == "TEMPORARY":
        st = Statement(Kind.WRITE, "CREATE")
        if t.word(j + 1) == "TABLE":
            named = _name(t, _skip_words(t, j + 2, "IF", "NOT", "EXISTS"), hi)
            if named is not None:
                st.temp_tables_created.append(named[0])
        return st
    if what in ("PROCEDURE", "FUNCTION", "TRIGGER", "EVENT"):
        ctx.analyze = False  # the body runs later, not now
    return Statement(Kind.WRITE, "CREATE", implicit_commit=True)


def _alter(ctx: _Ctx) -> Statement:
    ctx.analyze = ctx.t.word(object_type(ctx.t, ctx.i + 1, ctx.hi)) != "EVENT"  # ALTER EVENT ... DO body
    return Statement(Kind.WRITE, "ALTER", implicit_commit=True)


def _drop(ctx: _Ctx) -> Statement:
    t, hi = ctx.t, ctx.hi
    j = object_type(t, ctx.i + 1, hi)
    what = t.word(j)
    if what == "PREPARE":
        named = _name(t, j + 1, hi)
        return Statement(Kind.DEALLOCATE, "DROP", deallocate_name=named[0].lower() if named else None)
    temporary = what == "TEMPORARY"
    if temporary:
        j += 1
        what = t.word(j)
    st = Statement(Kind.WRITE, "DROP", implicit_commit=not temporary)
    if what in ("TABLE", "TABLES"):
        j = _skip_words(t, j + 1, "IF", "EXISTS")
        while (named := _name(t, j, hi)) is not None:
            st.tables_dropped.append(named[0])
            j = named[1]
            if t.text(j) != ",":
                break
            j += 1
    return st


def _analyze(ctx: _Ctx) -> Statement:
    if ctx.t.word(ctx.i + 1) in ("TABLE", "TABLES", "NO_WRITE_TO_BINLOG", "LOCAL"):
        return _admin(ctx)
    return _explain(ctx)  # MariaDB ANALYZE [FORMAT=JSON] SELECT ...: runs it and shows the plan


_EXPLAIN_OPTIONS = frozenset({"EXTENDED", "PARTITIONS", "ANALYZE", "VERBOSE"})
_EXPLAINED_READS = frozenset({"SELECT", "WITH", "TABLE", "VALUES"})
_EXPLAINED_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "FOR"})


def _explain(ctx: _Ctx) -> Statement:
    t, j = ctx.t, ctx.i + 1
    while True:
        word = t.word(j)
        if word in _EXPLAIN_OPTIONS:
            j += 1
        elif word == "FORMAT" and t.text(j + 1) == "=":
            j += 3
        else:
            break
    target = t.word(j)
    if target in _EXPLAINED_READS or t.text(j) == "(":
        read = True
    elif target in _EXPLAINED_WRITES:
        read = False
    else:  # DESCRIBE tbl / EXPLAIN tbl
        read = j < ctx.hi and t.kinds[j] in _NAME_KINDS
    return Statement(Kind.SHOW, t.word(ctx.i), is_read=read)


_SHOW_NOT_READ = frozenset(
    {
        # the session's own connection
        "WARNINGS",
        "ERRORS",
        "COUNT",
        "PROFILE",
        "PROFILES",
        # the server's own state: a replica's answer is not the primary's
        "MASTER",
        "BINARY",
        "BINLOG",
        "SLAVE",
        "REPLICA",
        "REPLICAS",
        "RELAYLOG",
        "PROCESSLIST",
    }
)


def _show(ctx: _Ctx) -> Statement:
    t, i = ctx.t, ctx.i
    what = t.word(i + 1)
    if what == "FULL":
        what = t.word(i + 2)
    return Statement(Kind.SHOW, "SHOW", is_read=what not in _SHOW_NOT_READ)


def _begin(ctx: _Ctx) -> Statement:
    return Statement(Kind.BEGIN, "BEGIN", implicit_commit=True)


def _start(ctx: _Ctx) -> Statement:
    if ctx.t.word(ctx.i + 1) == "TRANSACTION":
        return Statement(Kind.BEGIN, "START", implicit_commit=True)
    return _admin(ctx)  # START SLAVE / REPLICA / GROUP_REPLICATION


def _and_chain(t: Tokens, j: int) -> bool:
    """Whether ``[WORK] AND CHAIN`` (not ``AND NO CHAIN``) follows at ``j``."""
    j = _skip_words(t, j, "WORK")
    return t.word(j) == "AND" and t.word(j + 1) == "CHAIN"


def _commit(ctx: _Ctx) -> Statement:
    if _and_chain(ctx.t, ctx.i + 1):  # commits, then starts the next transaction at once
        return Statement(Kind.BEGIN, "COMMIT", implicit_commit=True)
    return Statement(Kind.COMMIT, "COMMIT")


def _rollback(ctx: _Ctx) -> Statement:
    t, i = ctx.t, ctx.i
    if t.word(_skip_words(t, i + 1, "WORK")) == "TO":
        return Statement(Kind.OTHER, "ROLLBACK")  # ROLLBACK [WORK] TO [SAVEPOINT] name
    if _and_chain(t, i + 1):
        return Statement(Kind.BEGIN, "ROLLBACK")
    return Statement(Kind.ROLLBACK, "ROLLBACK")


_XA_KINDS = {"START": Kind.BEGIN, "BEGIN": Kind.BEGIN, "COMMIT": Kind.COMMIT, "ROLLBACK": Kind.ROLLBACK}


def _xa(ctx: _Ctx) -> Statement:
    return Statement(_XA_KINDS.get(ctx.t.word(ctx.i + 1), Kind.OTHER), "XA")


def _simple(kind: Kind) -> Callable[[_Ctx], Statement]:
    """A handler for a keyword that alone decides the kind."""

    def handler(ctx: _Ctx) -> Statement:
        return Statement(kind, ctx.t.word(ctx.i))

    return handler


def _use(ctx: _Ctx) -> Statement:
    named = _name(ctx.t, ctx.i + 1, ctx.hi)
    return Statement(Kind.USE, "USE", schema=named[0] if named else None)


def _prepare(ctx: _Ctx) -> Statement:
    named = _name(ctx.t, ctx.i + 1, ctx.hi)
    return Statement(Kind.PREPARE, "PREPARE", prepare_name=named[0].lower() if named else None)


def _deallocate(ctx: _Ctx) -> Statement:
    named = _name(ctx.t, _skip_words(ctx.t, ctx.i + 1, "PREPARE"), ctx.hi)
    return Statement(Kind.DEALLOCATE, "DEALLOCATE", deallocate_name=named[0].lower() if named else None)


def _lock(ctx: _Ctx) -> Statement:
    tables = ctx.t.word(ctx.i + 1) in ("TABLE", "TABLES")
    return Statement(Kind.LOCK, "LOCK", lock_tables=True, implicit_commit=tables)


def _unlock(ctx: _Ctx) -> Statement:
    return Statement(Kind.UNLOCK, "UNLOCK", unlock_tables=True)


def _flush(ctx: _Ctx) -> Statement:
    t, i, hi = ctx.t, ctx.i, ctx.hi
    read_lock = (j := _find_word(t, i + 1, hi, "WITH")) >= 0 and t.word(j + 1) == "READ"
    export = (j := _find_word(t, i + 1, hi, "FOR")) >= 0 and t.word(j + 1) == "EXPORT"
    if read_lock or export:
        return Statement(Kind.LOCK, "FLUSH", lock_tables=True, implicit_commit=True)
    return _admin(ctx)


def _compound(ctx: _Ctx) -> Statement:
    """BEGIN NOT ATOMIC, IF, LOOP, labeled blocks ... run now: what they do to the session can't be told."""
    return Statement(Kind.OTHER, ctx.t.word(ctx.i), unparsable_set=True)


# ---------------------------------------------------------------------------------------------------- SET

_GLOBAL_SCOPES = frozenset({"global", "persist", "persist_only"})
_SCOPE_WORDS = {
    "GLOBAL": "global",
    "PERSIST": "global",
    "PERSIST_ONLY": "global",
    "SESSION": "session",
    "LOCAL": "session",
}
_BOOLEAN_VALUES = {"0": False, "OFF": False, "FALSE": False, "1": True, "ON": True, "TRUE": True}


def _item_end(t: Tokens, j: int, hi: int) -> int:
    """The index of the comma ending the SET assignment starting at ``j`` (``hi`` if it is the last)."""
    depth = 0
    for k in range(j, hi):
        text = t.texts[k]
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif text == "," and depth == 0 and t.kinds[k] is _OPERATOR:
            return k
    return hi


def _depends_on_session(t: Tokens, lo: int, hi: int) -> bool:
    """Whether a value reads a variable or runs a subquery (so it can't be replayed elsewhere)."""
    return any(t.kinds[k] in (_USER_VAR, _SYS_VAR) or t.word(k) == "SELECT" for k in range(lo, hi))


def _set(ctx: _Ctx) -> Statement:
    t, i, hi = ctx.t, ctx.i, ctx.hi
    first = t.word(i + 1)
    if first == "STATEMENT":  # SET STATEMENT var=value [, ...] FOR statement: per-statement values
        ctx.analyze = False
        j = _find_word(t, i + 2, hi, "FOR", depth0=True)
        if 0 <= j < hi - 1:
            return _statement(t, j + 1, hi)
        return Statement(Kind.OTHER, "SET", unparsable_set=True)
    if first == "PASSWORD" or (first == "DEFAULT" and t.word(i + 2) == "ROLE"):
        return Statement(Kind.WRITE, "SET", implicit_commit=True)
    st = Statement(Kind.SET, "SET")
    if first == "ROLE":
        st.unparsable_set = True
        return st
    scope = "session"  # the most recent scope keyword applies to the assignments after it
    j = i + 1
    while j < hi:
        item_scope = _SCOPE_WORDS.get(t.word(j))
        if item_scope is not None:
            scope = item_scope
            j += 1
        end = _item_end(t, j, hi)
        word = t.word(j)
        if word == "TRANSACTION":  # the characteristics run to the end, commas included
            value = t.source(j + 1, hi)
            if not value:
                st.unparsable_set = True
            elif item_scope == "global":
                st.global_set = True
            else:
                name = "session transaction" if item_scope == "session" else "next transaction"
                st.session_vars.append((name, value))
            break
        if word == "NAMES" or word == "CHARSET" or (word == "CHARACTER" and t.word(j + 1) == "SET"):
            value_at = j + 1 if word != "CHARACTER" else j + 2
            value = t.source(value_at, end)
            if value:
                st.session_vars.append(("names" if word == "NAMES" else "character set", value))
            else:
                st.unparsable_set = True
        else:
            _assignment(ctx, st, j, end, scope)
        j = end + 1
    if not (st.session_vars or st.user_vars_assigned or st.global_set):
        st.unparsable_set = True
    return st


def _assignment(ctx: _Ctx, st: Statement, j: int, end: int, scope: str) -> None:
    """Record the SET assignment ``name = value`` in tokens ``[j, end)``."""
    t = ctx.t
    kind = t.kinds[j] if j < end else None
    name: str | None = None
    target, after = scope, j + 1
    if kind is _USER_VAR:
        target, name = "user", user_var_name(t.texts[j])
    elif kind is _SYS_VAR:
        var_scope, name = sys_var_parts(t.texts[j])
        target = "global" if var_scope in _GLOBAL_SCOPES else "session"
    elif (named := _name(t, j, end)) is not None:
        name, after = named[0].lower(), named[1]
    if name is None or t.text(after) not in ("=", ":=") or after + 1 >= end:
        st.unparsable_set = True
        return
    if target == "user":
        st.user_vars_assigned.append(name)
        ctx.assigned.add(j)
    elif target == "global":
        st.global_set = True
    else:
        st.session_vars.append((name, t.source(after + 1, end)))
        if _depends_on_session(t, after + 1, end):
            st.unparsable_set = True
        if name == "sql_log_bin":
            st.sql_log_bin = _BOOLEAN_VALUES.get(unquote(t.source(after + 1, end)).upper())


_HANDLERS: dict[str, Callable[[_Ctx], Statement]] = {
    "SELECT": _select,
    "WITH": _with,
    "TABLE": _table_or_values,
    "VALUES": _table_or_values,
    "INSERT": _write,
    "UPDATE": _write,
    "DELETE": _write,
    "REPLACE": _write,
    "LOAD": _load,
    "CREATE": _create,
    "ALTER": _alter,
    "DROP": _drop,
    "TRUNCATE": _ddl,
    "RENAME": _ddl,
    "GRANT": _ddl,
    "REVOKE": _ddl,
    "OPTIMIZE": _ddl,
    "REPAIR": _ddl,
    "IMPORT": _ddl,
    "ANALYZE": _analyze,
    "CHECK": _admin,
    "CACHE": _admin,
    "RESET": _admin,
    "CHANGE": _admin,
    "INSTALL": _admin,
    "UNINSTALL": _admin,
    "STOP": _admin,
    "START": _start,
    "BEGIN": _begin,
    "COMMIT": _commit,
    "ROLLBACK": _rollback,
    "SAVEPOINT": _simple(Kind.SAVEPOINT),
    "XA": _xa,
    "SET": _set,
    "USE": _use,
    "SHOW": _show,
    "EXPLAIN": _explain,
    "DESCRIBE": _explain,
    "DESC": _explain,
    "CALL": _simple(Kind.CALL),
    "PREPARE": _prepare,
    "EXECUTE": _simple(Kind.EXECUTE),
    "DEALLOCATE": _deallocate,
    "LOCK": _lock,
    "UNLOCK": _unlock,
    "FLUSH": _flush,
    "DO": _simple(Kind.DO),
}

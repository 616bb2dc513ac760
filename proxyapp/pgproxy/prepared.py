"""A session's named prepared statements (its own names) and their preparing on the server connections it borrows,
under the proxy's names (``statements.server_statement``), as the MySQL side's ``session/prepared.py`` maps client
statement ids onto per-connection ones. A statement is prepared on a connection where it is first needed (the
proxy's Parse, its answer left out); a connection keeps up to ``pgsql-max_prepared_statements``, the least recently
used closed beyond it."""

from __future__ import annotations

from collections.abc import Callable

from proxyapp.pgproxy.pool import ServerConn
from proxyapp.pgproxy.responses import SWALLOW, Entry, ResponseOrder
from proxyapp.pgproxy.settings import executed
from proxyapp.pgproxy.statements import SYNC, Statement, close_statement


class PreparedStatements:
    """The statements a client prepared by name, and what preparing them on a server connection takes."""

    __slots__ = ("max_prepared", "named")

    def __init__(self, max_prepared: Callable[[], int]) -> None:
        self.max_prepared = max_prepared  # ``pgsql-max_prepared_statements``, read when a connection is full
        self.named: dict[str, Statement] = {}  # the client's name -> its statement

    def ensure(self, server: ServerConn, order: ResponseOrder, statement: Statement, sync: bool = False) -> bytes:
        """The Parse that prepares ``statement`` on ``server`` if it lacks it (its answer left out), else b"";
        ``sync``: followed by a Sync of the proxy's (before a simple Query, which an error would leave unread)."""
        first = b"" if statement.depends is None else self.ensure(server, order, statement.depends, sync)
        if statement.server_name in server.prepared:
            server.prepared.move_to_end(statement.server_name)
            return first
        closes = first + self.remember(server, order, statement.server_name)
        order.sent(80, SWALLOW, statement.server_name)
        if not sync:
            return closes + statement.parse
        order.sent(83, SWALLOW)
        return closes + statement.parse + SYNC

    def remember(self, server: ServerConn, order: ResponseOrder, server_name: str) -> bytes:
        """Note ``server_name`` as prepared on ``server``; the Closes (answers left out) of the least recently
        used statements beyond ``pgsql-max_prepared_statements``, to send first."""
        out = b""
        limit = self.max_prepared()
        while len(server.prepared) >= limit:
            oldest, _ = server.prepared.popitem(last=False)
            out += close_statement(oldest)
            order.sent(67, SWALLOW)
        server.prepared[server_name] = None
        return out

    def undo(self, undone: list[Entry]) -> None:
        """The client's Parses and Closes the server refused or skipped after an error, undone: a statement whose
        Parse failed does not exist, one whose Close was skipped still does (undone last first)."""
        named = self.named
        for entry in reversed(undone):
            assert entry.named is not None
            name, statement = entry.named
            if entry.kind == 67:
                named[name] = statement
            elif named.get(name) is statement:
                del named[name]
        undone.clear()

    def executed(self, sql: str) -> tuple[Statement, bytes] | None:
        """For an ``EXECUTE name`` of a statement the client prepared by the protocol: that statement, and ``sql``
        naming the server's statement instead; None when ``sql`` executes no such statement (the server's own, or
        none: it says so)."""
        found = executed(sql)
        statement = self.named.get(found[0]) if found is not None else None
        if found is None or statement is None:
            return None
        _, start, end = found
        return statement, (sql[:start] + statement.server_name + sql[end:]).encode("utf-8", "surrogateescape")

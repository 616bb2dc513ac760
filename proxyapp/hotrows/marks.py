"""Which keys of which queue a statement asks for: a ``trx_queue=QUEUE:KEY|KEY`` comment (the hint, mydbtest's
``[trx_queue :id]`` written as SQL), or a query rule's ``trx_queue`` with its ``trx_queue_key`` (a group of its
``match_pattern``, resolved by the rule engine, or a column the WHERE clause compares with values, read here).
"""

from __future__ import annotations

from proxyapp.config.rulecompile import QUEUE_NAME
from proxyapp.hotrows.queues import QueueKey
from proxyapp.sql.lex import TokenKind, Tokens, unquote
from proxyapp.sql.where import comparisons, first_statement, values

#: The most keys one statement may ask for, and the longest key.
MAX_KEYS = 16
MAX_KEY_LENGTH = 256


class MarkError(ValueError):
    """A hint that cannot be read; the message says why, quoting the hint as written (the ERR packet shows what is
    not UTF-8 in it as ``\\xff``: ``err_packet``)."""


def hinted(value: str) -> list[QueueKey]:
    """The keys a hint's value (what follows ``trx_queue=``) asks for, in the queues' global order; MarkError when
    it is malformed."""
    queue, colon, keys = value.partition(":")
    if not colon or not QUEUE_NAME.fullmatch(queue) or not keys:
        raise MarkError(f"malformed trx_queue hint '{value[:80]}': QUEUE:KEY or QUEUE:KEY|KEY|... expected")
    found = keys.split("|")
    if len(found) > MAX_KEYS or any(not k or len(k) > MAX_KEY_LENGTH for k in found):
        raise MarkError(
            f"malformed trx_queue hint '{value[:80]}': 1 to {MAX_KEYS} keys of 1 to {MAX_KEY_LENGTH} characters"
        )
    return ordered(queue, found)


def ordered(queue: str, keys: list[str]) -> list[QueueKey]:
    """``keys`` of ``queue``, each once, in the queues' global order."""
    return sorted({(queue, key) for key in keys})


def column_keys(sql: str, column: str) -> list[str]:
    """The values the WHERE clause of ``sql``'s first statement compares ``column`` (any table's) with by ``=`` or
    ``IN``, as text; [] when it compares none (the statement then runs without the queue)."""
    found = first_statement(sql)
    if found is None:
        return []
    tokens, lo, hi = found
    name = column.lower()

    def column_at(tokens: Tokens, i: int, hi: int) -> int:
        if i >= hi or tokens.kinds[i] not in (TokenKind.WORD, TokenKind.QUOTED_IDENT):
            return -1
        if tokens.text(i + 1) == "." and i + 2 < hi:  # t.column: any qualifier
            i += 2
            if tokens.kinds[i] not in (TokenKind.WORD, TokenKind.QUOTED_IDENT):
                return -1
        return i + 1 if unquote(tokens.texts[i]).lower() == name else -1

    where = comparisons(tokens, lo, hi, column_at)
    if where is None:
        return []
    return [str(v) for v in values(tokens, where)][:MAX_KEYS]

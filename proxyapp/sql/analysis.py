"""A query's analysis for the COM_QUERY and COM_STMT_PREPARE pipelines: its statements (``scan``) and its digest
(``compute_digest``), from one cache lookup for the statements applications repeat.

Applications send the same statements again and again with other numbers in them. ``simple_shape`` replaces bare
numbers by ``?`` (and gives up on anything with quotes, comments or signs), and neither scan's fast path (it reads the
first word and looks for trigger words, none of which holds a digit or a '?') nor the digest (numbers become '?'
anyway) tells a query from its shape. So both are worked out once per shape and kept (``CACHE_SIZE`` shapes, the oldest
dropped first): the next query of that shape costs the shape and one lookup.

A query the fast path does not answer is scanned every time (its statements may hold its literals: ``SET @x = 5``);
its digest still comes from the cache.
"""

from __future__ import annotations

from typing import Final

from proxyapp.sql.digest import CACHE_SIZE, CACHEABLE_LENGTH, Digest, compute_digest, simple_shape
from proxyapp.sql.scan import Statement, fast_statement, scan


def analyze(sql: str, max_length: int) -> tuple[list[Statement], Digest, bool]:
    """``(scan(sql), compute_digest(sql, max_length))``, the work done once per shape of ``sql``, and whether ``sql``
    may hold a comment (``/*``: an annotation the query rules read); a query of a simple shape holds none."""
    shape = simple_shape(sql) if len(sql) <= CACHEABLE_LENGTH else None
    if shape is None:
        return scan(sql), compute_digest(sql, max_length), "/*" in sql
    fast, digest = _of_shape(shape, max_length)
    return ([fast] if fast is not None else scan(sql)), digest, False


#: Each shape's analysis: (the digest length it was made for, the fast path's Statement or None, the digest).
_SHAPES: Final[dict[str, tuple[int, Statement | None, Digest]]] = {}


def _of_shape(shape: str, max_length: int) -> tuple[Statement | None, Digest]:
    """What every query of ``shape`` has in common: the fast path's Statement (or None) and the digest. Kept in
    ``_SHAPES`` (a plain dict: one lookup by the shape, where an LRU cache would hash and compare a key tuple and
    reorder its list on every hit); the oldest shape is dropped first once it holds ``CACHE_SIZE``."""
    known = _SHAPES.get(shape)
    if known is not None and known[0] == max_length:
        return known[1], known[2]
    fast, digest = fast_statement(shape), compute_digest(shape, max_length)
    if known is None and len(_SHAPES) >= CACHE_SIZE:
        del _SHAPES[next(iter(_SHAPES))]
    _SHAPES[shape] = (max_length, fast, digest)
    return fast, digest

"""A query's analysis for the COM_QUERY and COM_STMT_PREPARE pipelines: its statements (``scan``) and its digest
(``compute_digest``), from one cache lookup for the statements applications repeat.

Applications send the same statements again and again with other numbers in them. ``simple_shape`` replaces bare
numbers by ``?`` (and gives up on anything with quotes, comments or signs), and neither scan's fast path (it reads the
first word and looks for trigger words, none of which holds a digit or a '?') nor the digest (numbers become '?'
anyway) tells a query from its shape. So both are worked out once per shape and kept (``CACHE_SIZE`` shapes, the oldest
dropped first; the C table of ``_shape`` holds up to 8,192 and drops in its own order): the next query of that shape
costs the shape and one lookup. The C table looks a shape up by its bytes, so a shape seen before is never made as a
str nor hashed.

A query the fast path does not answer is scanned every time (its statements may hold its literals: ``SET @x = 5``);
its digest still comes from the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from proxyapp.sql.digest import CACHE_SIZE, CACHEABLE_LENGTH, Digest, compute_digest, python_shape, simple_shape
from proxyapp.sql.scan import Statement, fast_statement, scan


def analyze(sql: str, max_length: int) -> tuple[list[Statement], Digest, bool]:
    """``(scan(sql), compute_digest(sql, max_length))``, the work done once per shape of ``sql``, and whether ``sql``
    may hold a comment (``/*``: an annotation the query rules read); a query of a simple shape holds none."""
    found = KNOWN(sql, python_shape) if len(sql) <= CACHEABLE_LENGTH else None
    if found is None:
        return scan(sql), compute_digest(sql, max_length), "/*" in sql
    if isinstance(found, ShapeFacts) and found.max_length == max_length:
        facts = found
    else:  # a shape seen for the first time (or since it was dropped), or with another digest length
        shape = found if isinstance(found, str) else simple_shape(sql)
        assert shape is not None, "a text known to have a shape has one"
        facts = ShapeFacts(max_length, fast_statement(shape), compute_digest(shape, max_length))
        KEEP(shape, facts)
    fast = facts.fast
    return ([fast] if fast is not None else scan(sql)), facts.digest, False


class ShapeFacts:
    """What every query of a shape has in common: the fast path's Statement (or None) and the digest, made for
    digests of ``max_length`` characters."""

    __slots__ = ("digest", "fast", "max_length")

    def __init__(self, max_length: int, fast: Statement | None, digest: Digest) -> None:
        self.max_length = max_length
        self.fast = fast
        self.digest = digest


#: ``python_known``'s and ``python_keep``'s table: each shape's facts (a plain dict: one lookup by the shape, where an
#: LRU cache would hash and compare a key tuple and reorder its list on every hit).
_SHAPES: Final[dict[str, object]] = {}


def python_known(sql: str, other: Callable[[str], str | None]) -> object:
    """None when ``sql`` has no simple shape (``other(sql)``: ``python_shape``); else what ``python_keep`` kept for
    its shape, or the shape when nothing is (``_shape.known``'s Python twin)."""
    shape = other(sql)
    if shape is None:
        return None
    kept = _SHAPES.get(shape)
    return kept if kept is not None else shape


def python_keep(shape: str, value: object) -> None:
    """Keep ``value`` for ``shape``; the oldest shape is dropped first once ``CACHE_SIZE`` are kept (``_shape.keep``'s
    Python twin)."""
    if shape not in _SHAPES and len(_SHAPES) >= CACHE_SIZE:
        del _SHAPES[next(iter(_SHAPES))]
    _SHAPES[shape] = value


def _load_shapes() -> tuple[Callable[[str, Callable[[str], str | None]], object], Callable[[str, object], None]]:
    try:
        from proxyapp.sql import _shape
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0
        return python_known, python_keep
    return _shape.known, _shape.keep


#: The shapes seen and their facts: the C table of ``_shape`` when it is built (looked up by the shape's bytes, with
#: no str made or hashed for a shape seen before), else ``python_known`` and ``python_keep``.
_SHAPE_TABLE: Final = _load_shapes()
KNOWN: Final = _SHAPE_TABLE[0]
KEEP: Final = _SHAPE_TABLE[1]

"""A query's shape in C (``_shape.c``)."""

from collections.abc import Callable

def shape(sql: str, literal: str, other: Callable[[str, str], str | None], /) -> str | None:
    """``simple_shape`` of ``sql``: its bare numbers replaced by ``literal``, or None when it holds more than bare
    numbers; ``other(sql, literal)`` (the Python rules) when either text is not ASCII."""

def known(sql: str, other: Callable[[str], str | None], /) -> object:
    """None when ``sql`` has no simple shape (``other(sql)``, the Python rules, shapes a text that is not ASCII); else
    what ``keep`` kept for its shape (``?`` for each bare number), or that shape (a str) when nothing is kept for it."""

def keep(shape: str, value: object, /) -> None:
    """Keep ``value`` for ``shape``: it replaces what was kept for that shape, or for another whose slots it takes."""

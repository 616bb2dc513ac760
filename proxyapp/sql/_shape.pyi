"""A query's shape in C (``_shape.c``)."""

from collections.abc import Callable

def shape(sql: str, literal: str, other: Callable[[str, str], str | None], /) -> str | None:
    """``simple_shape`` of ``sql``: its bare numbers replaced by ``literal``, or None when it holds more than bare
    numbers; ``other(sql, literal)`` (the Python rules) when either text is not ASCII."""

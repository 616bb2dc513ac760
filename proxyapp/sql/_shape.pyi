"""A query's shape in C (``_shape.c``)."""

def shape(sql: str, literal: str, /) -> str | None:
    """``simple_shape`` of an ASCII ``sql`` (ValueError for any other): its bare numbers replaced by ``literal``
    (ASCII too), or None when it holds more than bare numbers."""

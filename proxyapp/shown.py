"""A text as the proxy shows it to people and to other programs: the stats (``/stats``, ``/metrics``), the events log,
the processlist, its own error messages, and the control plane's pages and API (``fleet`` imports it: it imports
nothing but the standard library).

The proxy decodes what a client sends (a query, a schema name) as UTF-8 with ``surrogateescape``, so that bytes that
are not UTF-8 go back to the server as they came: each such byte is a lone surrogate in the text (0xff is U+DCFF).
No UTF-8 encoder, JSON reader, Prometheus scraper or web page takes a lone surrogate, so wherever such a text is
shown it is shown through ``shown``: each byte that is not UTF-8 as ``\\xff``, any other lone surrogate (a JSON
document may hold one) as ``\\uXXXX``. Every other character stays as it is, so a valid text is shown unchanged
(a backslash too), and ``shown`` of a shown text is that text.
"""

from __future__ import annotations

import re
from typing import Final, TypeVar, cast

_Value = TypeVar("_Value")

#: A lone surrogate: what ``surrogateescape`` makes of a byte that is not UTF-8, or a JSON ``\\ud800`` alone.
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as surrogateescape kept it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` with each byte that is not UTF-8 written ``\\xNN`` (and any other lone surrogate ``\\uNNNN``): a text
    every encoder, JSON reader and page takes. A text without such a character is returned as it is."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escaped, text)


def shown_in(value: _Value) -> _Value:
    """``value`` (what ``json.loads`` returns) with every text in it, keys too, passed through ``shown``: a report
    or an answer from a node, made safe to store and to show whatever its texts hold."""
    if isinstance(value, str):
        return cast(_Value, shown(value))
    if isinstance(value, dict):
        return cast(_Value, {shown(k) if isinstance(k, str) else k: shown_in(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(_Value, [shown_in(v) for v in value])
    return value

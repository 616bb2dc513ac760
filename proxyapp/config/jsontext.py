"""The one JSON reader for what users and nodes send: config documents, the admin API's bodies, the control plane's
API bodies and the JSON a config's columns hold. Stricter than ``json.loads`` where JSON's looseness would hide a
mistake: an object that names a key twice is refused (JSON allows it and the last would silently win), and so is a
document nested deeper than Python can decode (a clear error, never a crash)."""

from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (JSON allows it; a config must not: the last would silently win)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKey(f"the key {key!r} appears twice in one object")
        obj[key] = value
    return obj


def read_json(text: str | bytes) -> Any:
    """Decode JSON: ``json.JSONDecodeError`` for bad JSON (nesting too deep to decode included), ``DuplicateKey``
    for an object that names a key twice."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None

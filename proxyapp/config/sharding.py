"""Sharding algorithms: which shard of a group holds the row whose shard key has a given value.

A sharded table (``mysql_sharded_tables``) names its algorithm and the algorithm's parameters as a JSON object;
``parse_parameters`` checks their shape (per row, as the control plane's forms do) and ``build`` makes the
algorithm for a group of N shards (the config document's cross-table check, which knows N). Every algorithm is a
pure function of the key, so each proxy node, and the control plane's "which shard holds K" tester, answer alike.

- ``mod``: the integer key modulo N (Amoeba's ``City_ID % 2``); never negative.
- ``hash``: a stable hash (BLAKE2b) of the key, modulo N. ``key_type``: ``integer`` (the default: ``'0401'`` is
  401, as MariaDB compares a string with an integer column) or ``string`` (the key's folded text, below).
- ``consistent_hash``: the same hash modulo a fixed number of virtual buckets (``buckets``, default 1024), each
  bucket assigned to a shard (``assignment``: ``[[first, last, shard], ...]``, default an even split), so that a
  later change can move buckets between shards without rehashing every key; ``key_type`` as for ``hash``.
- ``range``: ``ranges``: ``[[from, to, shard], ...]``, ``from`` included, ``to`` excluded, ``null`` unbounded;
  ``default``: the shard of a key in no range (else such a key is refused).
- ``list``: ``lists``: ``{"SHARD": [value, ...], ...}``; ``default`` as for ranges. Integer values only: an integer
  key; any string value: a string key, each value and key folded.
- ``date``: ``unit`` (``day``, ``month`` or ``year``), ``start`` (``YYYY-MM-DD``), ``per_shard`` (units per shard,
  default 1): shard ``((units since start) // per_shard) mod N``, as MyCat's date rule; a date before ``start`` is
  refused.
- ``global``: no key: the table is on every shard (written to all, read from one).

A string key is placed by its folded text (``fold``): keys that MariaDB's utf8mb4 ``general_ci``, ``unicode_ci``,
``unicode_520_ci`` and ``bin`` collations hold equal (case, accents, trailing spaces) fold alike, so they land on
one shard. The fold is exact only for the characters ``placeable`` lists (printable ASCII and the letters that fold
to one of them, CJK ideographs, Hangul syllables); a key with any other character has no shard (a read of it runs
on every shard, an insert of it is refused), never a guessed one. A comparison of a string key column with an
integer (``WHERE code = 7``) matches many texts (``'7'``, ``'07'``), so it has no shard either.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from proxyapp.config.jsontext import DuplicateKey, read_json

#: The algorithms a sharded table may name.
ALGORITHMS = ("mod", "hash", "consistent_hash", "range", "list", "date", "global")
#: The most shards a group may have.
MAX_SHARDS = 4096
#: consistent_hash's virtual buckets unless its parameters say otherwise, and the most it may have.
DEFAULT_BUCKETS = 1024
MAX_BUCKETS = 65536
DATE_UNITS = ("day", "month", "year")
#: The types a hashed key may have.
KEY_TYPES = ("integer", "string")

#: A shard key's value as a statement gives it: an integer, a string (a date is a string), or NULL.
Key = int | str | None


class ShardKeyError(ValueError):
    """A key no shard holds (NULL, the wrong type, outside every range or list, before a date rule's start)."""


@dataclass(frozen=True)
class Algorithm:
    """A sharding algorithm for a group of ``shards`` shards; ``shard_of(key)`` is the shard that holds ``key``."""

    name: str
    shards: int
    pick: Callable[[Key], int]
    strings: bool = False  # the key is a string (an integer compared with it has no shard; stored, it is its text)

    def shard_of(self, key: Key) -> int:
        """The shard (0 to shards - 1) that holds the rows whose key equals ``key`` as MariaDB compares it;
        ShardKeyError when no one shard does."""
        if key is None:
            raise ShardKeyError("a shard key cannot be NULL")
        return self.pick(key)

    def shard_of_stored(self, key: Key) -> int:
        """The shard of a row written with ``key`` (an INSERT's value: an integer into a string key is stored as
        its text)."""
        if self.strings and isinstance(key, int):
            key = str(key)
        return self.shard_of(key)


def parse_parameters(algorithm: str, text: str) -> dict[str, Any]:
    """The parameters of ``algorithm`` (a JSON object, or "" for none), checked for shape without the shard count;
    ValueError naming what is wrong."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if not text.strip():
        params: Any = {}
    else:
        try:
            params = read_json(text)
        except DuplicateKey as exc:
            raise ValueError(f"not a JSON object: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON object: {exc.msg} at column {exc.colno}") from None
    if not isinstance(params, dict):
        raise ValueError(f"must be a JSON object, not {type(params).__name__}")
    allowed = _PARAMETERS[algorithm]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        names = ", ".join(allowed) if allowed else "none"
        raise ValueError(f"{algorithm} takes no parameter {unknown[0]!r} (its parameters: {names})")
    _SHAPES[algorithm](params)
    return params


def build(algorithm: str, text: str, shards: int) -> Algorithm:
    """``algorithm`` with its parameters ``text`` for a group of ``shards`` shards; ValueError naming the problem
    (a shard number outside the group, buckets left unassigned...)."""
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"a shard group has 1 to {MAX_SHARDS} shards, not {shards}")
    params = parse_parameters(algorithm, text)
    return Algorithm(algorithm, shards, _BUILDERS[algorithm](params, shards), string_keyed(algorithm, params))


def string_keyed(algorithm: str, params: dict[str, Any]) -> bool:
    """Whether ``algorithm`` with ``params`` places rows by a string key (an integer inserted is stored as text)."""
    if algorithm == "list":
        return any(isinstance(v, str) for values in params["lists"].values() for v in values)
    return params.get("key_type") == "string"


# --- the keys ---------------------------------------------------------------------------------------------------


#: A string MariaDB reads as exactly that integer (spaces around, a sign, ASCII digits; no point, exponent or _).
_INTEGER_TEXT = re.compile(r"[ \t\n\r]*[+-]?[0-9]+[ \t\n\r]*")


def _integer(key: Key) -> int:
    """An integer key: an integer, or a string MariaDB compares with an integer column as that integer."""
    if isinstance(key, bool):
        raise ShardKeyError(f"the shard key must be an integer, not {key!r}")
    if isinstance(key, int):
        return key
    assert isinstance(key, str)
    if _INTEGER_TEXT.fullmatch(key) is None:
        raise ShardKeyError(f"the shard key must be an integer, not {key!r}")
    return int(key)


def placeable(char: str) -> str | None:
    """The folded form of one character of a string key (case and accents gone), or None when the fold is not
    known to match MariaDB's collations for it (``tests/live/proxyapp/sharding/test_key_fold.py`` checks every
    character of the Basic Multilingual Plane against the server's weights)."""
    if "\uac00" <= char <= "\ud7a3":  # a Hangul syllable: itself (its jamo are not placed)
        return char
    folded = "".join(c for c in unicodedata.normalize("NFKD", char) if unicodedata.category(c) != "Mn").casefold()
    if len(folded) != 1:
        return None
    if " " <= folded <= "~" or "\u4e00" <= folded <= "\u9fff" or "\u3400" <= folded <= "\u4dbf":
        return folded
    return None


def fold(key: str) -> str:
    """A string key as the collations compare it: each character folded, trailing spaces gone (PAD SPACE);
    ShardKeyError for a key with a character the fold does not know."""
    out = []
    for char in key:
        folded = placeable(char)
        if folded is None:
            raise ShardKeyError(
                f"the string key {key!r} has a character ({char!r}, U+{ord(char):04X}) that ProxyFleet cannot place "
                "exactly under a case- or accent-insensitive collation"
            )
        out.append(folded)
    return "".join(out).rstrip(" ")


def _string(key: Key) -> str:
    """A string key's folded text; an integer has none (``WHERE code = 7`` matches '7', '07', ' 7'...)."""
    if not isinstance(key, str):
        raise ShardKeyError(f"an integer ({key!r}) compared with a string shard key matches many keys")
    return fold(key)


def _hash_text(text: str) -> int:
    """A stable 64-bit hash of ``text``: the same on every node and every run."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def _hasher(params: dict[str, Any]) -> Callable[[Key], int]:
    """The hash of a key of the parameters' ``key_type``: an integer by its digits, a string by its fold."""
    if params.get("key_type") == "string":
        return lambda key: _hash_text(_string(key))
    return lambda key: _hash_text(str(_integer(key)))


def _date(key: Key) -> datetime.date:
    """A date key: ``YYYY-MM-DD``, optionally followed by a time."""
    if not isinstance(key, str):
        raise ShardKeyError(f"the shard key must be a date 'YYYY-MM-DD', not {key!r}")
    try:
        return datetime.date.fromisoformat(key.strip()[:10])
    except ValueError:
        raise ShardKeyError(f"the shard key must be a date 'YYYY-MM-DD', not {key!r}") from None


# --- each algorithm's parameters: their shape, then the picker for N shards ---------------------------------------

_PARAMETERS: dict[str, tuple[str, ...]] = {
    "mod": (),
    "hash": ("key_type",),
    "consistent_hash": ("buckets", "assignment", "key_type"),
    "range": ("ranges", "default"),
    "list": ("lists", "default"),
    "date": ("unit", "start", "per_shard"),
    "global": (),
}


def _whole(value: Any, what: str, minimum: int = 0, maximum: int | None = None) -> int:
    too_big = maximum is not None and isinstance(value, int) and value > maximum
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or too_big:
        bound = f" to {maximum}" if maximum is not None else " or more"
        raise ValueError(f"{what} must be a whole number {minimum}{bound}, not {json.dumps(value)}")
    return value


def _no_shape(params: dict[str, Any]) -> None:
    return None


def _hash_shape(params: dict[str, Any]) -> None:
    if params.get("key_type", "integer") not in KEY_TYPES:
        raise ValueError(f"key_type must be one of {', '.join(KEY_TYPES)}, not {json.dumps(params['key_type'])}")


def _bucket_shape(params: dict[str, Any]) -> None:
    _hash_shape(params)
    buckets = _whole(params.get("buckets", DEFAULT_BUCKETS), "buckets", 1, MAX_BUCKETS)
    assignment = params.get("assignment")
    if assignment is None:
        return
    if not isinstance(assignment, list) or not assignment:
        raise ValueError("assignment must be a list of [first bucket, last bucket, shard]")
    covered = [0] * buckets
    for item in assignment:
        if not isinstance(item, list) or len(item) != 3:
            raise ValueError(f"assignment: {json.dumps(item)} is not [first bucket, last bucket, shard]")
        first = _whole(item[0], "assignment: a first bucket", 0, buckets - 1)
        last = _whole(item[1], "assignment: a last bucket", first, buckets - 1)
        _whole(item[2], "assignment: a shard", 0, MAX_SHARDS - 1)
        for bucket in range(first, last + 1):
            covered[bucket] += 1
    twice = next((b for b, n in enumerate(covered) if n > 1), None)
    if twice is not None:
        raise ValueError(f"assignment: bucket {twice} is assigned twice")
    missing = next((b for b, n in enumerate(covered) if n == 0), None)
    if missing is not None:
        raise ValueError(f"assignment: bucket {missing} is assigned to no shard (buckets 0 to {buckets - 1})")


def _bound(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer or null, not {json.dumps(value)}")
    return value


def _default_shape(params: dict[str, Any]) -> None:
    if params.get("default") is not None:
        _whole(params["default"], "default", 0, MAX_SHARDS - 1)


def _range_shape(params: dict[str, Any]) -> None:
    ranges = params.get("ranges")
    if not isinstance(ranges, list) or not ranges:
        raise ValueError("ranges is required: a list of [from, to, shard] (from included, to excluded, null: open)")
    spans: list[tuple[float, float]] = []
    for item in ranges:
        if not isinstance(item, list) or len(item) != 3:
            raise ValueError(f"ranges: {json.dumps(item)} is not [from, to, shard]")
        low, high = _bound(item[0], "ranges: from"), _bound(item[1], "ranges: to")
        _whole(item[2], "ranges: a shard", 0, MAX_SHARDS - 1)
        lo = float("-inf") if low is None else low
        hi = float("inf") if high is None else high
        if lo >= hi:
            raise ValueError(f"ranges: {json.dumps(item)} holds no key (from must be below to)")
        clash = next(((a, b) for a, b in spans if lo < b and a < hi), None)
        if clash is not None:
            raise ValueError(f"ranges: {json.dumps(item)} overlaps another range")
        spans.append((lo, hi))
    _default_shape(params)


def _list_shape(params: dict[str, Any]) -> None:
    lists = params.get("lists")
    if not isinstance(lists, dict) or not lists:
        raise ValueError('lists is required: an object {"SHARD": [value, ...], ...}')
    for shard, values in lists.items():
        if not shard.isdigit() or int(shard) >= MAX_SHARDS:
            raise ValueError(f"lists: {json.dumps(shard)} is not a shard number")
        if not isinstance(values, list) or not values:
            raise ValueError(f"lists: shard {shard} must have a list of values")
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(f"lists: shard {shard}: {json.dumps(value)} is not an integer or a string")
    _list_keys(lists)
    _default_shape(params)


def _date_shape(params: dict[str, Any]) -> None:
    if params.get("unit") not in DATE_UNITS:
        raise ValueError(f"unit is required: one of {', '.join(DATE_UNITS)}")
    start = params.get("start")
    try:
        datetime.date.fromisoformat(start) if isinstance(start, str) else None
    except ValueError:
        start = None
    if not isinstance(start, str):
        raise ValueError("start is required: the first day of shard 0, 'YYYY-MM-DD'")
    _whole(params.get("per_shard", 1), "per_shard", 1)


_SHAPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "mod": _no_shape,
    "hash": _hash_shape,
    "consistent_hash": _bucket_shape,
    "range": _range_shape,
    "list": _list_shape,
    "date": _date_shape,
    "global": _no_shape,
}


def _in_group(shard: int, shards: int, where: str) -> int:
    if shard >= shards:
        raise ValueError(f"{where}: shard {shard} is not in the group (shards 0 to {shards - 1})")
    return shard


def _mod(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    return lambda key: _integer(key) % shards


def _hashed(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    hashed = _hasher(params)
    return lambda key: hashed(key) % shards


def _buckets(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    count = params.get("buckets", DEFAULT_BUCKETS)
    owner = [bucket * shards // count for bucket in range(count)]
    for first, last, shard in params.get("assignment") or ():
        for bucket in range(first, last + 1):
            owner[bucket] = _in_group(shard, shards, "assignment")
    hashed = _hasher(params)
    return lambda key: owner[hashed(key) % count]


def _fallback(params: dict[str, Any], shards: int, what: str) -> Callable[[int | str], int]:
    default = params.get("default")
    if default is None:

        def refuse(key: int | str) -> int:
            raise ShardKeyError(f"no shard holds the key {key!r}: it is in no {what} and the rule has no default")

        return refuse
    shard = _in_group(default, shards, "default")
    return lambda key: shard


def _ranged(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    spans = [(lo, hi, _in_group(shard, shards, "ranges")) for lo, hi, shard in params["ranges"]]
    otherwise = _fallback(params, shards, "range")

    def pick(key: Key) -> int:
        value = _integer(key)
        for lo, hi, shard in spans:
            if (lo is None or value >= lo) and (hi is None or value < hi):
                return shard
        return otherwise(value)

    return pick


def _listed(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    listed = _list_keys(params["lists"])
    where = {value: _in_group(shard, shards, "lists") for value, shard in listed.items()}
    otherwise = _fallback(params, shards, "list")
    as_key: Callable[[Key], int | str] = _string if string_keyed("list", params) else _integer

    def pick(key: Key) -> int:
        value = as_key(key)
        shard = where.get(value)
        return otherwise(value) if shard is None else shard

    return pick


def _list_keys(lists: dict[str, list[int | str]]) -> dict[int | str, int]:
    """Each listed value as a key (integers; or, when any value is a string, every value's folded text) and its
    shard; ValueError for a value listed twice as the collation compares them."""
    strings = any(isinstance(v, str) for values in lists.values() for v in values)
    keys: dict[int | str, int] = {}
    for shard, values in lists.items():
        for value in values:
            try:
                key: int | str = fold(str(value)) if strings else value
            except ShardKeyError as exc:
                raise ValueError(f"lists: shard {shard}: {exc}") from None
            if key in keys:
                raise ValueError(
                    f"lists: {json.dumps(value)} of shard {shard} is the same key as a value of shard {keys[key]}"
                    + (" (strings compare without case, accents or trailing spaces)" if strings else "")
                )
            keys[key] = int(shard)
    return keys


def _dated(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    unit, per_shard = params["unit"], params.get("per_shard", 1)
    start = datetime.date.fromisoformat(params["start"])

    def pick(key: Key) -> int:
        day = _date(key)
        if day < start:
            raise ShardKeyError(f"no shard holds the date {day.isoformat()}: the rule starts on {start.isoformat()}")
        if unit == "day":
            units = (day - start).days
        elif unit == "month":
            units = (day.year - start.year) * 12 + day.month - start.month
        else:
            units = day.year - start.year
        return units // per_shard % shards

    return pick


def _everywhere(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    def pick(key: Key) -> int:
        raise ShardKeyError("a global table is on every shard: it has no shard key")

    return pick


_BUILDERS: Mapping[str, Callable[[dict[str, Any], int], Callable[[Key], int]]] = {
    "mod": _mod,
    "hash": _hashed,
    "consistent_hash": _buckets,
    "range": _ranged,
    "list": _listed,
    "date": _dated,
    "global": _everywhere,
}

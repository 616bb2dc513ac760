"""Sharding algorithms: which shard of a group holds the row whose shard key has a given value.

A sharded table (``mysql_sharded_tables``) names its algorithm and the algorithm's parameters as a JSON object;
``parse_parameters`` checks their shape (per row, as the control plane's forms do) and ``build`` makes the
algorithm for a group of N shards (the config document's cross-table check, which knows N). Every algorithm is a
pure function of the key, so each proxy node, and the control plane's "which shard holds K" tester, answer alike.

- ``mod``: the integer key modulo N (Amoeba's ``City_ID % 2``); never negative.
- ``hash``: a stable hash (BLAKE2b) of the key's text, modulo N.
- ``consistent_hash``: the same hash modulo a fixed number of virtual buckets (``buckets``, default 1024), each
  bucket assigned to a shard (``assignment``: ``[[first, last, shard], ...]``, default an even split), so that a
  later change can move buckets between shards without rehashing every key.
- ``range``: ``ranges``: ``[[from, to, shard], ...]``, ``from`` included, ``to`` excluded, ``null`` unbounded;
  ``default``: the shard of a key in no range (else such a key is refused).
- ``list``: ``lists``: ``{"SHARD": [value, ...], ...}``; ``default`` as for ranges.
- ``date``: ``unit`` (``day``, ``month`` or ``year``), ``start`` (``YYYY-MM-DD``), ``per_shard`` (units per shard,
  default 1): shard ``((units since start) // per_shard) mod N``, as MyCat's date rule; a date before ``start`` is
  refused.
- ``global``: no key: the table is on every shard (written to all, read from one).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The algorithms a sharded table may name.
ALGORITHMS = ("mod", "hash", "consistent_hash", "range", "list", "date", "global")
#: The most shards a group may have.
MAX_SHARDS = 4096
#: consistent_hash's virtual buckets unless its parameters say otherwise, and the most it may have.
DEFAULT_BUCKETS = 1024
MAX_BUCKETS = 65536
DATE_UNITS = ("day", "month", "year")

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

    def shard_of(self, key: Key) -> int:
        """The shard (0 to shards - 1) of ``key``; ShardKeyError when no shard holds it."""
        if key is None:
            raise ShardKeyError("a shard key cannot be NULL")
        return self.pick(key)


def parse_parameters(algorithm: str, text: str) -> dict[str, Any]:
    """The parameters of ``algorithm`` (a JSON object, or "" for none), checked for shape without the shard count;
    ValueError naming what is wrong."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if not text.strip():
        params: Any = {}
    else:
        try:
            params = json.loads(text)
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
    return Algorithm(algorithm, shards, _BUILDERS[algorithm](params, shards))


# --- the keys ---------------------------------------------------------------------------------------------------


def _integer(key: Key) -> int:
    """An integer key (a string of digits counts, as MySQL compares it)."""
    if isinstance(key, bool):
        raise ShardKeyError(f"the shard key must be an integer, not {key!r}")
    if isinstance(key, int):
        return key
    assert isinstance(key, str)
    try:
        return int(key.strip())
    except ValueError:
        raise ShardKeyError(f"the shard key must be an integer, not {key!r}") from None


def _hash(key: Key) -> int:
    """A stable 64-bit hash of the key's text: the same on every node and every run (integers by their digits)."""
    text = str(_integer(key)) if isinstance(key, int) else str(key)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


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
    "hash": (),
    "consistent_hash": ("buckets", "assignment"),
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


def _bucket_shape(params: dict[str, Any]) -> None:
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
    seen: dict[Any, str] = {}
    for shard, values in lists.items():
        if not shard.isdigit() or int(shard) >= MAX_SHARDS:
            raise ValueError(f"lists: {json.dumps(shard)} is not a shard number")
        if not isinstance(values, list) or not values:
            raise ValueError(f"lists: shard {shard} must have a list of values")
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(f"lists: shard {shard}: {json.dumps(value)} is not an integer or a string")
            if value in seen:
                raise ValueError(f"lists: {json.dumps(value)} is listed for shards {seen[value]} and {shard}")
            seen[value] = shard
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
    "hash": _no_shape,
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
    return lambda key: _hash(key) % shards


def _buckets(params: dict[str, Any], shards: int) -> Callable[[Key], int]:
    count = params.get("buckets", DEFAULT_BUCKETS)
    owner = [bucket * shards // count for bucket in range(count)]
    for first, last, shard in params.get("assignment") or ():
        for bucket in range(first, last + 1):
            owner[bucket] = _in_group(shard, shards, "assignment")
    return lambda key: owner[_hash(key) % count]


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
    where: dict[int | str, int] = {}
    for shard, values in params["lists"].items():
        for value in values:
            where[value] = _in_group(int(shard), shards, "lists")
    otherwise = _fallback(params, shards, "list")

    def pick(key: Key) -> int:
        assert key is not None
        if key in where:
            return where[key]
        if isinstance(key, str) and key.strip().lstrip("-").isdigit() and int(key) in where:
            return where[int(key)]  # '7' is 7, as MySQL compares a string with an integer
        if isinstance(key, int) and str(key) in where:
            return where[str(key)]
        return otherwise(key)

    return pick


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

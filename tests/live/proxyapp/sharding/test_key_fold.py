"""The string-key fold (``proxyapp.config.sharding.fold``) against the server's own collation weights: every
character of the Basic Multilingual Plane that the fold places must fold alike with every character the collation
holds equal to it (the same WEIGHT_STRING), for each collation docs/sharding.md names. A character the fold gets
wrong would put equal keys on different shards: a wrong answer."""

from __future__ import annotations

from collections import defaultdict

import pytest

from devstack.sandbox import Sandbox
from proxyapp.config.sharding import fold, placeable

COLLATIONS = ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci", "utf8mb4_bin")
#: Every BMP character but NUL and the surrogates (not characters of their own in utf8mb4).
CHARACTERS = [chr(c) for c in range(1, 0x10000) if not 0xD800 <= c < 0xE000]
BATCH = 4000


@pytest.mark.parametrize("collation", COLLATIONS)
def test_characters_the_collation_holds_equal_fold_alike(sandbox: Sandbox, collation: str) -> None:
    groups: dict[bytes, set[str]] = defaultdict(set)
    placed = 0
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        for start in range(0, len(CHARACTERS), BATCH):
            batch = CHARACTERS[start : start + BATCH]
            weights = ", ".join(f"WEIGHT_STRING(_utf8mb4 %s COLLATE {collation})" for _ in batch)
            cur.execute(f"SELECT {weights}", batch)
            row = cur.fetchone()
            assert row is not None
            for char, weight in zip(batch, row, strict=True):
                folded = placeable(char)
                if folded is not None:
                    groups[bytes(weight)].add(folded)
                    placed += 1
    split = {weight.hex(): sorted(folds) for weight, folds in groups.items() if len(folds) > 1}
    assert split == {}
    assert placed > 40_000  # ASCII, the Latin letters folding to it, CJK ideographs and Hangul syllables


@pytest.mark.parametrize("collation", COLLATIONS)
def test_keys_the_collation_holds_equal_fold_alike(sandbox: Sandbox, collation: str) -> None:
    keys = [
        "abc",
        "ABC",
        "abc  ",
        "Äbç",
        "ÂBC ",
        "a b",
        "A B",
        "数据库",
        "한국",
        "",
        " ",
        "x-y",
        "O'Brien",
        "\uff21",
        "a",
    ]  # U+FF21: fullwidth A
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        for a in keys:
            for b in keys:
                cur.execute(f"SELECT _utf8mb4 %s COLLATE {collation} = _utf8mb4 %s", (a, b))
                row = cur.fetchone()
                assert row is not None
                if row[0]:
                    assert fold(a) == fold(b), (collation, a, b)

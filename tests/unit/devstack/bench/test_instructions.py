"""The instruction counter's reading of callgrind's output (no valgrind needed)."""

from __future__ import annotations

from pathlib import Path

from devstack.bench.instructions import Count, _totals


def test_the_count_is_the_larger_of_the_totals_and_summary_lines(tmp_path: Path) -> None:
    dumped = tmp_path / "callgrind.out.1"
    dumped.write_text("# callgrind format\nversion: 1\nevents: Ir\nsummary: 0\nfn=main\n3 5\ntotals: 134554000\n")
    assert _totals(dumped) == {"Ir": 134_554_000}
    empty = tmp_path / "callgrind.out"
    empty.write_text("events: Ir\nsummary: 0\ntotals: 0\n")
    assert _totals(empty) == {"Ir": 0}
    headless = tmp_path / "callgrind.out.2"
    headless.write_text("events: Ir\nfn=main\n")
    assert _totals(headless) == {}


def test_simulated_cache_misses_are_read_by_their_event_names(tmp_path: Path) -> None:
    dumped = tmp_path / "callgrind.out.1"
    dumped.write_text(
        "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 0 0 0 0 0 0 0 0 0\nfn=main\n"
        "totals: 169852634 48640823 31094795 1798513 1579948 770405 22321 519194 264582\n"
    )
    totals = _totals(dumped)
    assert totals["Ir"] == 169_852_634
    assert totals["D1mr"] + totals["D1mw"] == 2_350_353
    assert totals["DLmr"] + totals["DLmw"] == 783_776


def test_a_count_says_its_misses_only_when_the_caches_were_simulated() -> None:
    assert Count(20615.7).describe() == "20,616 instructions per query"
    simulated = Count(20615.7, 285.24, 95.06).describe()
    assert simulated == "20,616 instructions per query, 285.2 L1d and 95.1 last-level data misses"

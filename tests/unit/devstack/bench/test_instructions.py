"""The instruction counter's reading of callgrind's output (no valgrind needed)."""

from __future__ import annotations

from pathlib import Path

from devstack.bench.instructions import _totals


def test_the_count_is_the_larger_of_the_totals_and_summary_lines(tmp_path: Path) -> None:
    dumped = tmp_path / "callgrind.out.1"
    dumped.write_text("# callgrind format\nversion: 1\nevents: Ir\nsummary: 0\nfn=main\n3 5\ntotals: 134554000\n")
    assert _totals(dumped) == 134_554_000
    empty = tmp_path / "callgrind.out"
    empty.write_text("events: Ir\nsummary: 0\ntotals: 0\n")
    assert _totals(empty) == 0
    headless = tmp_path / "callgrind.out.2"
    headless.write_text("events: Ir\nfn=main\n")
    assert _totals(headless) == 0

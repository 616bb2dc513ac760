"""No single query can stall a worker (issue 13, "bounded work per session"): every parser a query meets
(``tests/support/parse_cost.py``: the tokenizer, the statement scanner, digests, statement splitting, the first
comment's annotations, KILL) works in steps linear in its input, on adversarial text (unterminated comments and
quotes, floods of openers, trailing whitespace, long lists...).

The steps are counted, not timed: valgrind counts the instructions a run executes, which a loaded machine does not
change. Quadrupling the input must about quadruple the count over start-up (a quadratic parser would multiply it by
16). Then every input is parsed at 1 MB, natively, to its end.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from devstack.stack import REPO
from tests.support import parse_cost

#: The sizes counted: SMALL and four times it (valgrind runs about fifty times slower than the machine).
SMALL = 8 << 10
#: The most the count may grow when the input quadruples: 4 for linear work; quadratic work pushes it towards 16.
MAX_GROWTH = 5.5
MEGABYTE = 1 << 20


def instructions(size: int, *names: str) -> int:
    """The instructions a run of ``parse_cost`` at ``size`` executes (over ``names``, default every input)."""
    counted = [sys.executable, "-m", "tests.support.parse_cost", str(size), *names]
    run = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *counted],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    assert found is not None, run.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def growth(*names: str) -> float:
    """How much the parsing's instruction count grows from SMALL to 4 * SMALL (the start-up's subtracted)."""
    with ThreadPoolExecutor(2) as pool:
        start, small, large = pool.map(lambda size: instructions(size, *names), (0, SMALL, 4 * SMALL))
    return (large - start) / (small - start)


def test_every_per_query_parser_works_in_linear_steps() -> None:
    assert shutil.which("valgrind"), "valgrind is needed: deploy/install-system-deps.sh installs it"
    overall = growth()
    if overall > MAX_GROWTH:  # name the inputs that grow too fast
        slow = {name: round(growth(name), 1) for name in parse_cost.INPUTS}
        culprits = {name: g for name, g in slow.items() if g > MAX_GROWTH}
        raise AssertionError(f"parsing grows {overall:.1f}x when its input grows 4x; per input: {culprits or slow}")
    assert 3 <= overall <= MAX_GROWTH


def test_every_parser_reads_a_megabyte_of_each_adversarial_input_to_its_end() -> None:
    for make in parse_cost.INPUTS.values():
        text = make(MEGABYTE)
        assert len(text) >= MEGABYTE - 16
        parse_cost.parse_all(text)

"""The differential test of the sharding proxy (issue 14): random workloads (``tests.support.sharding_workload``)
through a proxy over 2 and 4 independent MariaDB servers, under every algorithm that fits each key type, answer
statement by statement as one unsharded server does (``tests.support.sharding_diff``): the same rows, affected
counts and errors, or a refusal the proxy makes by design (``EXPECTED_REFUSALS``).

A known wrong answer being fixed is an ``OPEN_DEFECTS`` entry: its mismatches do not fail the combos, and its own
test is a strict xfail that fails once the defect no longer shows (then drop the entry). ``make
test-sharding-long`` runs many more seeds."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.support.monitor_support import own_sandbox
from tests.support.sharding_diff import OPEN_DEFECTS, Combo, Defect, Endpoint, Report, Rig, combos
from tests.support.sharding_workload import generate

#: The workloads each combo runs (their key type is the combo's), and their length.
SEEDS = (101, 202)
STATEMENTS = 250
COMBOS = combos((2, 4))

Outcomes = Callable[[Combo], Report]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcomes]:
    """Each combo's report (run once, when first asked), on four independent servers (the reference schemas on the
    first) behind one proxy serving every combo."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(own_sandbox(f"diff{n}", replicas=0)).primary() for n in range(4)]
        shards = [Endpoint(server.host, server.port) for server in servers]
        rig = stack.enter_context(Rig(shards, shards[0], COMBOS, tmp_path_factory.mktemp("diff-proxy")))
        reports: dict[Combo, Report] = {}

        def outcome(combo: Combo) -> Report:
            if combo not in reports:
                reports[combo] = Report()
                for seed in SEEDS:
                    reports[combo].add(rig.run(combo, generate(seed, STATEMENTS, combo.key_kind)))
            return reports[combo]

        yield outcome


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{c.algorithm}-{c.key_kind}-{c.shards}")
def test_the_proxy_answers_as_one_server(outcomes: Outcomes, combo: Combo) -> None:
    """Every statement's answer is one server's, a refusal by design, or an open defect's."""
    report = outcomes(combo)
    new = report.new()
    assert not new, "\n".join([*(str(m) for m in new[:5]), report.summary()])
    same = sum(n for (_, verdict), n in report.verdicts.items() if verdict == "same")
    assert same > len(SEEDS) * STATEMENTS // 2, report.summary()


if OPEN_DEFECTS:  # none open now: then there is nothing to run (rather than a skipped empty parametrization)

    @pytest.mark.parametrize(
        "defect",
        [pytest.param(d, id=d.slug, marks=pytest.mark.xfail(raises=AssertionError, strict=True)) for d in OPEN_DEFECTS],
    )
    def test_an_open_defect_is_fixed(outcomes: Outcomes, defect: Defect) -> None:
        """No combo shows the defect (a strict xfail while it does)."""
        shown = [m for combo in COMBOS for m in outcomes(combo).mismatches if defect.explains(m)]
        assert not shown, f"{defect.text}: {len(shown)} mismatches, the first:\n{shown[0]}"

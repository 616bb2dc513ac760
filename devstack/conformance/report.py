"""The report: per suite and target, the direct and proxied runs' counts and the differing tests by kind, as a
table, as JSON (``var/conformance/report.json``) and as the failures' text."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from devstack.conformance.compare import BY_DESIGN, FLAKY, KNOWN_DEFECT, PROXY_ONLY, Finding
from devstack.conformance.expectations import Expectation
from devstack.conformance.journal import Counts, Outcome

#: How many lines of a failure's traceback the report shows.
EXCERPT_LINES = 12
COLUMNS = ("suite", "target", "tests", "direct passed", "proxy passed", "proxy-only", "by design", "known defects",
           "flaky")  # fmt: skip


@dataclass
class TargetReport:
    """A suite through one target, compared with the same suite direct."""

    suite: str
    target: str
    direct: Counts
    proxy: Counts
    direct_seconds: float
    proxy_seconds: float
    findings: list[Finding] = field(default_factory=list)
    skipped_through_proxy_only: list[str] = field(default_factory=list)
    failing_direct: list[str] = field(default_factory=list)
    stale: list[Expectation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    reference: bool = False  # a peer measured beside the proxy (PgBouncer): its differences are its own

    def of(self, kind: str) -> list[Finding]:
        """The findings of one kind."""
        return [f for f in self.findings if f.kind == kind]

    @property
    def failed(self) -> bool:
        """Whether this comparison fails the run: a proxy-only failure, or a run that went wrong (never a
        reference's)."""
        return not self.reference and bool(self.of(PROXY_ONLY) or self.problems)

    def failing(self) -> set[str]:
        """The tests that passed direct and failed here again when rerun (a reference's unexplained differences,
        the proxy's proxy-only, by-design and known ones): flaky ones left out."""
        return {f.test for f in self.findings if f.kind != FLAKY}

    def row(self) -> tuple[str, ...]:
        """The table's row."""
        kinds = (PROXY_ONLY, BY_DESIGN, KNOWN_DEFECT, FLAKY)
        counts = (self.direct.total, self.direct.passed, self.proxy.passed, *(len(self.of(k)) for k in kinds))
        target = f"{self.target} (reference)" if self.reference else self.target
        return (self.suite, target, *(str(n) for n in counts))


@dataclass(frozen=True)
class Beside:
    """A proxy target beside a reference on one suite: the tests that fail through one of them and pass through
    the other (each passing direct; flaky ones left out)."""

    suite: str
    target: str
    reference: str
    worse: list[str]  # fail through the target, pass through the reference
    better: list[str]  # fail through the reference, pass through the target

    def summary(self) -> str:
        """One line: how many tests each fails where the other passes."""
        return (
            f"[conformance] {self.suite}: {len(self.worse)} tests fail through {self.target} and pass through "
            f"{self.reference}; {len(self.better)} fail through {self.reference} and pass through {self.target}"
        )


def beside(reports: list[TargetReport]) -> list[Beside]:
    """Each proxy target beside each reference of the same suite."""
    out = []
    for ref in (r for r in reports if r.reference):
        for r in reports:
            if r.suite == ref.suite and not r.reference:
                ours, theirs = r.failing(), ref.failing()
                out.append(Beside(r.suite, r.target, ref.target, sorted(ours - theirs), sorted(theirs - ours)))
    return out


def table(reports: list[TargetReport]) -> str:
    """The per-suite table, in plain text columns."""
    rows = [COLUMNS, *(r.row() for r in reports)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(_cell(i, cell, widths[i]) for i, cell in enumerate(row)) for row in rows)


def _cell(column: int, text: str, width: int) -> str:
    """Names left-aligned, numbers right-aligned."""
    return text.ljust(width) if column < 2 else text.rjust(width)


#: A line of a traceback that names an exception and its message (``ValueError: ...``, ``MySQLdb.OperationalError:``).
EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Timeout|Failure|Exit)\b[^\n]*")


def exceptions(detail: str) -> list[str]:
    """The exceptions a failure's text names, in order (each of a chain), without repeats."""
    found = [m.group(0) for m in EXCEPTION_LINE.finditer(detail) if m.start() == 0 or detail[m.start() - 1] == "\n"]
    return list(dict.fromkeys(found))


def excerpt(detail: str, lines: int = EXCERPT_LINES) -> str:
    """A failure's exceptions (each of a chain, the first one often the cause), then the end of its text."""
    tail = detail.strip().splitlines()[-lines:]
    named = [e for e in exceptions(detail) if e not in tail]
    return "\n".join([*named, *(["..."] if named else []), *tail])


def details(reports: list[TargetReport]) -> str:
    """The text under the table: each proxy-only failure with its traceback's end, the flaky tests with their
    evidence, the stale list entries and the runs that went wrong."""
    out: list[str] = []
    for r in reports:
        where = f"{r.suite} / {r.target}"
        for f in [] if r.reference else r.of(PROXY_ONLY):
            out.append(f"PROXY-ONLY {where}: {f.test} ({f.proxy.status} through the proxy)")
            out.append("    " + excerpt(f.proxy.detail).replace("\n", "\n    "))
        out += [f"FLAKY {where}: {f.test}: {f.note}" for f in r.of(FLAKY)]
        out += [f"STALE {where}: {e.tests} ({e.reason}) no longer differs" for e in r.stale]
        out += [f"{'NOTE' if r.reference else 'PROBLEM'} {where}: {p}" for p in r.problems]
    return "\n".join(out)


def to_json(reports: list[TargetReport], meta: dict[str, Any]) -> dict[str, Any]:
    """The report as a JSON document: ``meta`` (date, commit, mode, durations) and one entry per comparison."""
    return {**meta, "comparisons": [asdict(r) for r in reports]}


def write_json(path: Path, reports: list[TargetReport], meta: dict[str, Any]) -> None:
    """Write the JSON report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(reports, meta), indent=2) + "\n")


def from_json(doc: dict[str, Any]) -> list[TargetReport]:
    """The comparisons of a JSON report, as written by ``write_json``."""
    reports = []
    for c in doc["comparisons"]:
        findings = [
            Finding(f["test"], f["kind"], Outcome(**f["direct"]), Outcome(**f["proxy"]), f["note"])
            for f in c["findings"]
        ]
        stale = [Expectation(**{**e, "tests": tuple(e["tests"])}) for e in c["stale"]]
        counts = {"direct": Counts(**c["direct"]), "proxy": Counts(**c["proxy"])}
        reports.append(TargetReport(**{**c, **counts, "findings": findings, "stale": stale}))
    return reports

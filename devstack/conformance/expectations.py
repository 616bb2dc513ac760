"""The differences kept on purpose: ``by_design.toml`` (through the proxy a test behaves otherwise by design, with
the reason) and ``known_defects.toml`` (a proxy defect that is open, with the issue that will fix it), each a list
of ``[[difference]]`` tables naming a suite, a target and the tests (ids or ``fnmatch`` patterns) it covers."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BY_DESIGN = HERE / "by_design.toml"
KNOWN_DEFECTS = HERE / "known_defects.toml"


class ExpectationError(ValueError):
    """A differences file that does not read."""


@dataclass(frozen=True)
class Expectation:
    """One listed difference: the tests of one suite and target it covers, and why (with the issue for a defect)."""

    suite: str
    target: str
    tests: tuple[str, ...]
    reason: str
    issue: int | None = None

    def covers(self, suite: str, target: str, test: str) -> bool:
        """Whether this entry names ``test`` of ``suite`` through ``target``."""
        return suite == self.suite and target == self.target and any(fnmatch.fnmatchcase(test, p) for p in self.tests)


def parse(text: str, *, need_issue: bool, source: str = "<text>") -> list[Expectation]:
    """The entries of a differences file's text; ExpectationError naming the entry and the field at fault (a
    known defect must name its issue, a by-design difference must not)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExpectationError(f"{source}: {exc}") from exc
    unknown = set(doc) - {"difference"}
    if unknown:
        raise ExpectationError(f"{source}: unknown top-level keys {sorted(unknown)}")
    entries = []
    for n, row in enumerate(doc.get("difference", []), 1):
        where = f"{source}: difference {n}"
        fields = {"suite", "target", "tests", "reason"} | ({"issue"} if need_issue else set())
        missing, extra = fields - set(row), set(row) - fields
        if missing or extra:
            raise ExpectationError(f"{where}: missing {sorted(missing)}, unknown {sorted(extra)}")
        tests = row["tests"]
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t for t in tests):
            raise ExpectationError(f"{where}: tests must be a non-empty list of test ids or patterns")
        if not str(row["reason"]).strip():
            raise ExpectationError(f"{where}: the reason is empty")
        if need_issue and (not isinstance(row["issue"], int) or row["issue"] <= 0):
            raise ExpectationError(f"{where}: issue must be an issue number")
        entries.append(
            Expectation(str(row["suite"]), str(row["target"]), tuple(tests), str(row["reason"]), row.get("issue"))
        )
    return entries


def load(path: Path, *, need_issue: bool) -> list[Expectation]:
    """The entries of a differences file (none when it does not exist)."""
    if not path.exists():
        return []
    return parse(path.read_text(), need_issue=need_issue, source=path.name)


def find(entries: list[Expectation], suite: str, target: str, test: str) -> Expectation | None:
    """The first entry that covers the test, if any."""
    return next((e for e in entries if e.covers(suite, target, test)), None)

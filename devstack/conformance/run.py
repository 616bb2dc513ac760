"""``make conformance``: each suite run direct, then through its targets on a proxy node, compared test by test;
the differing tests explained by the lists or a rerun, the table printed and the report written. Exits 1 when a
comparison has a proxy-only failure or a run went wrong.

    python -m devstack.conformance [--ci] [--suite NAME ...] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import signal
import subprocess
import sys
import time

from devstack import pgbouncer
from devstack.conformance import compare, docs, expectations
from devstack.conformance.journal import count
from devstack.conformance.report import TargetReport, beside, details, table, write_json
from devstack.conformance.sources import HOME, prepare
from devstack.conformance.suites import CI_SUITES, SUITES, Suite
from devstack.conformance.targets import REFERENCES
from devstack.stack import REPO

RUNS = HOME / "runs"
REPORT = HOME / "report.json"
CI_REPORT = HOME / "report-ci.json"


def run_suite(
    suite: Suite, ci: bool, by_design: list[expectations.Expectation], known: list[expectations.Expectation]
) -> list[TargetReport]:
    """One suite direct and through each of its targets, each comparison's findings after one rerun, direct and
    through the target, of the tests the lists do not explain (in their context: Django's whole selection,
    asyncpg's whole files)."""
    out = RUNS / ("ci" if ci else "full") / suite.name
    shutil.rmtree(out, ignore_errors=True)  # no rerun's files from an earlier run left beside this one's
    suite.prepare()
    selection = suite.selection(ci)
    print(f"[conformance] {suite.name}: direct", flush=True)
    direct = suite.run(suite.direct, selection, out / "direct")
    node = out / "proxy-node"
    reports = []
    with suite.proxies(node) as endpoints:
        left: dict[str, list[str]] = {}
        for target in suite.targets:
            print(f"[conformance] {suite.name}: {target}", flush=True)
            proxied = suite.run(endpoints[target], selection, out / target)
            differing = compare.differing(direct.outcomes, proxied.outcomes)
            reference = target in REFERENCES  # a peer's differences are its own: no list names them
            lists = ([], []) if reference else (by_design, known)
            found, left[target] = compare.explain(
                suite.name, target, differing, direct.outcomes, proxied.outcomes, *lists
            )
            stale = compare.stale(lists[0] + lists[1], suite.name, target, list(direct.outcomes), differing)
            report = TargetReport(
                suite.name,
                target,
                count(direct.outcomes),
                count(proxied.outcomes),
                round(direct.seconds, 1),
                round(proxied.seconds, 1),
                found,
                compare.skipped_through_proxy_only(direct.outcomes, proxied.outcomes),
                compare.failing_direct(direct.outcomes),
                stale,
                [f"direct: {p}" for p in direct.problems] + [f"{target}: {p}" for p in proxied.problems],
                reference,
            )
            reports.append((report, proxied))
        to_rerun = sorted({t for tests in left.values() for t in tests})
        again_direct = {}
        if to_rerun:
            print(f"[conformance] {suite.name}: rerun direct for {len(to_rerun)} differing tests", flush=True)
            again_direct = suite.rerun(suite.direct, to_rerun, selection, out / "rerun-direct")
        for report, proxied in reports:
            tests = left[report.target]
            if tests:
                print(f"[conformance] {suite.name}: rerun through {report.target} for {len(tests)}", flush=True)
                again = suite.rerun(endpoints[report.target], tests, selection, out / f"rerun-{report.target}")
                report.findings += compare.judge(
                    tests, direct.outcomes, proxied.outcomes, again_direct, again, suite.lookup
                )
    tracebacks = (node / "proxy.log").read_text(errors="replace").count("Traceback")
    for report, _ in reports:
        if tracebacks and not report.reference:
            report.problems.append(f"the proxy logged {tracebacks} tracebacks ({node / 'proxy.log'})")
    return [r for r, _ in reports]


def commit() -> str:
    """The checkout's commit (with ``+dirty`` when it has changes)."""
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", ".", ":!var"], cwd=REPO, capture_output=True)
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    """Run the suites, print the table and the failures, write the report; 1 when a comparison failed."""
    parser = argparse.ArgumentParser(prog="python -m devstack.conformance", description=__doc__.split("\n")[0])
    parser.add_argument("--ci", action="store_true", help="the CI subset (Django's core apps on MySQL)")
    parser.add_argument("--suite", action="append", choices=sorted(SUITES), help="run only this suite (repeatable)")
    parser.add_argument("--write-docs", action="store_true", help="write docs/compatibility.md from this run")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a SIGTERM stops the proxy and PgBouncer it started
    names = args.suite or (list(CI_SUITES) if args.ci else list(SUITES))
    by_design = expectations.load(expectations.BY_DESIGN, need_issue=False)
    known = expectations.load(expectations.KNOWN_DEFECTS, need_issue=True)
    started = time.monotonic()
    prepare()
    reports: list[TargetReport] = []
    durations: dict[str, float] = {}
    for name in names:
        suite_start = time.monotonic()
        reports += run_suite(SUITES[name], args.ci, by_design, known)
        durations[name] = round(time.monotonic() - suite_start, 1)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "mode": "ci" if args.ci else "full",
        "suites": names,
        "seconds": round(time.monotonic() - started, 1),
        "suite_seconds": durations,
        "pgbouncer": pgbouncer.version_line(),
    }
    path = CI_REPORT if args.ci else REPORT
    write_json(path, reports, meta)
    print(details(reports))
    print()
    print(table(reports))
    for side in beside(reports):
        print(side.summary())
    print(f"\n[conformance] {meta['mode']} run in {meta['seconds']:.0f} s; report: {path.relative_to(REPO)}")
    if args.write_docs:
        docs.write(path)
        print(f"[conformance] wrote {docs.DOC.relative_to(REPO)}")
    return 1 if any(r.failed for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())

"""``make conformance``'s CI subset: Django's own basic, transactions, model_fields, queries, select_for_update and
backends tests on MySQL, direct to the MariaDB at 127.0.0.1:3306 and through a proxy node, compared test by test
(``python -m devstack.conformance --ci``; about a minute and a half with the pinned sdist cached, half a minute more to
fetch it and make the suites' virtualenv). A proxy-only failure that neither list of differences names fails it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devstack.conformance.run import CI_REPORT
from devstack.stack import REPO

#: The harness's own bound: the subset, the rerun of what differs, and the first run's download and virtualenv.
RUN_TIMEOUT_S = 900


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_djangos_core_tests_on_mysql_pass_through_the_proxy_as_they_pass_direct() -> None:
    CI_REPORT.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "devstack.conformance", "--ci"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    output = done.stdout[-20_000:] + done.stderr[-5_000:]
    [comparison] = json.loads(CI_REPORT.read_text())["comparisons"]
    assert (comparison["suite"], comparison["target"]) == ("django-mysql", "proxy")
    assert comparison["direct"]["passed"] > 1000, output  # the subset really ran direct
    assert comparison["problems"] == [], output
    proxy_only = [f["test"] for f in comparison["findings"] if f["kind"] == "proxy-only"]
    assert proxy_only == [], output
    assert done.returncode == 0, output

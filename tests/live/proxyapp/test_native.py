"""The mypyc-compiled hot modules: a proxy runs them exactly when the build matches the sources, never a stale one."""

from __future__ import annotations

import os

from devstack.proxy import rw_split_config
from devstack.sandbox import Sandbox
from proxyapp import native
from tests.support.harness import StartProxy
from tests.unit.proxyapp.test_native import HOT


def test_the_proxy_runs_compiled_modules_only_from_a_fresh_build(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)
    running = set(proxy.stats()["native"])
    if native.is_fresh():
        assert running >= HOT
    else:
        assert running == set()  # edited since the build: the plain modules run, never the stale ones
    if os.environ.get("PROXYFLEET_REQUIRE_NATIVE") == "1":  # `make test` builds first, so CI runs compiled
        assert native.is_fresh() and running >= HOT

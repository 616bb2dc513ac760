"""The admin credential through a real proxy (issue 13, D1/D2): the token file made 0600 at the first start, every
POST refused without it (the supervisor's endpoint and, through it, the workers'), secrets shown only with it, and a
token file others may read refused at start."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from devstack.proxy import rw_split_config
from devstack.sandbox import APP_PASSWORD, Sandbox
from devstack.stack import REPO
from proxyapp import credential
from tests.support.harness import StartProxy


def anonymous(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """An admin call without the credential: (status, JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_only_the_token_s_owner_drives_the_proxy_and_sees_its_secrets(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    document = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-threads", "variable_value": "2"}],
    )
    proxy = start_proxy(document)
    assert stat.S_IMODE(proxy.token_path.stat().st_mode) == 0o600
    before = proxy.admin("GET", "/config")["checksum"]

    status, answer = anonymous(proxy.admin_port, "POST", "/reload", {"mysql_users": []})
    assert status == 401 and "needs the admin credential" in answer["error"]
    status, answer = anonymous(proxy.admin_port, "POST", "/processlist/1/kill")
    assert status == 401
    assert proxy.admin("GET", "/config")["checksum"] == before  # nothing was loaded

    status, seen = anonymous(proxy.admin_port, "GET", "/config")
    assert status == 200 and seen["secrets"] == "masked"
    assert {u["password"] for u in seen["document"]["mysql_users"]} == {"********"}
    shown = proxy.admin("GET", "/config")
    assert {u["password"] for u in shown["document"]["mysql_users"]} == {APP_PASSWORD}

    # With the credential the supervisor drives its workers (their internal ports want it too).
    assert proxy.admin("POST", "/reload", document)["ok"] is True
    with proxy.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


def test_a_token_file_others_may_read_stops_the_start(sandbox: Sandbox, tmp_path: Path) -> None:
    config = tmp_path / "proxy.json"
    config.write_text(json.dumps(rw_split_config(sandbox.primary().port, [])))
    token = tmp_path / "shared.token"
    token.write_text("a-token-everyone-can-read-0123\n")
    token.chmod(0o644)
    run = subprocess.run(
        [sys.executable, "-m", "proxyapp", "run", "--config", str(config), "--admin-token-file", str(token)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert f"the admin token file {token} may be read or written by others (mode 0644): chmod 600 it" in run.stderr
    assert credential.DEFAULT_NAME not in {p.name for p in tmp_path.iterdir()}

"""The control plane's REST API over HTTP, as end-to-end tests drive a running web server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ApiClient:
    """``/api/v1`` as one account (token authentication), every call scoped to ``cluster`` when one is given."""

    def __init__(self, base: str, username: str, password: str, cluster: str | None = None) -> None:
        self.base = base
        self.cluster = cluster
        self.token = ""
        self.token = self.call("POST", "/auth/token/", {"username": username, "password": password})["token"]

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """``/api/v1{path}``: the decoded JSON answer; AssertionError naming the HTTP error."""
        url = f"{self.base}/api/v1{path}"
        if self.cluster is not None:
            url += f"{'&' if '?' in path else '?'}cluster={self.cluster}"
        request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode()}") from None
        return json.loads(raw) if raw else None

"""Talking to a node's admin endpoint (``ProxyNode.admin_address``) for what only the live node knows: its
processlist, its runtime servers, and KILL. Every call is bounded by a timeout and says what went wrong."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from fleet.core.models import ProxyNode
from proxyapp import credential
from proxyapp.shown import shown_in

TIMEOUT = 3.0


class NodeUnreachable(Exception):
    """The node's admin endpoint could not be asked (no address, refused, timed out, a bad answer)."""


def call(node: ProxyNode, method: str, path: str, body: Any = None) -> Any:
    """One admin call to ``node``: the decoded JSON answer (an error status's answer too, which says why), its texts
    as they may be shown (``shown_in``: a query's bytes that are not UTF-8 as ``\\xff``)."""
    if not node.admin_address:
        raise NodeUnreachable(f"node {node.name} has no admin address")
    data = None if body is None else json.dumps(body).encode()
    headers = credential.header(node.admin_token) if node.admin_token else {}
    request = urllib.request.Request(f"http://{node.admin_address}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return shown_in(json.loads(response.read()))
    except urllib.error.HTTPError as error:
        try:
            return shown_in(json.loads(error.read()))
        except ValueError:
            raise NodeUnreachable(f"{node.admin_address} answered {error.code}") from None
    except (OSError, ValueError) as error:
        raise NodeUnreachable(f"{node.admin_address}: {error}") from None


def processlist(node: ProxyNode) -> list[dict[str, Any]]:
    """The node's client sessions (stats_mysql_processlist)."""
    rows = call(node, "GET", "/processlist")
    if not isinstance(rows, list):
        raise NodeUnreachable(f"{node.admin_address}: the processlist is not a list")
    return rows


def kill(node: ProxyNode, session_id: int, query_only: bool) -> dict[str, Any]:
    """KILL [QUERY] session ``session_id`` on ``node``: the node's answer (``ok``, or ``error``)."""
    answer = call(node, "POST", f"/processlist/{int(session_id)}/kill", {"query_only": query_only})
    return answer if isinstance(answer, dict) else {"ok": False, "error": "an answer that is not an object"}


def reset_digests(node: ProxyNode) -> int:
    """Empty ``node``'s digest table (stats_mysql_query_digest_reset); how many rows it had."""
    rows = call(node, "POST", "/stats/query_digest/reset")
    if not isinstance(rows, list):
        raise NodeUnreachable(f"{node.admin_address}: the reset did not answer with the digest rows")
    return len(rows)

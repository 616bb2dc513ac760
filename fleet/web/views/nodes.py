"""A node's page: what it last reported (counters, pools, the monitor's view, recent server moves, its config)
and, live from its admin endpoint, its client sessions with KILL and KILL QUERY for operators (audited)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from fleet.core import audit, nodeadmin
from fleet.core.models import AuditEntry, ProxyNode
from fleet.core.stats import read_section
from fleet.web.access import operator_only, viewer_page
from proxyapp.report.reader import read_config, read_counters, read_monitor, read_pools, read_transitions

#: The global counters the page shows first (the rest follow, by name).
KEY_COUNTERS = (
    "Client_Connections_connected",
    "Client_Connections_created",
    "Client_Connections_aborted",
    "Questions",
    "Slow_queries",
    "Active_Transactions",
    "ConnPool_get_conn_success",
    "ConnPool_get_conn_failure",
    "generated_error_packets",
    "Queries_frontends_bytes_recv",
    "Queries_frontends_bytes_sent",
    "Queries_backends_bytes_sent",
    "Queries_backends_bytes_recv",
)


@viewer_page
def node_page(request: HttpRequest, name: str) -> HttpResponse:
    """One node of any cluster, by name."""
    node = get_object_or_404(ProxyNode.objects.select_related("cluster"), name=name)
    report = node.last_report
    problems: list[str] = []
    counters = read_section(read_counters, report, {}, problems)
    ordered = [(k, counters[k]) for k in KEY_COUNTERS if k in counters]
    ordered += sorted((k, v) for k, v in counters.items() if k not in KEY_COUNTERS)
    sessions: list[dict[str, object]] = []
    unreachable = ""
    try:
        sessions = nodeadmin.processlist(node)
    except nodeadmin.NodeUnreachable as error:
        unreachable = str(error)
    context = {
        "node": node,
        "counters": ordered,
        "pools": read_section(read_pools, report, [], problems),
        "monitor": read_section(read_monitor, report, None, problems) or [],
        "transitions": list(reversed(read_section(read_transitions, report, [], problems)))[:20],
        "config": read_section(read_config, report, None, problems),
        "report_problems": problems,
        "sessions": sessions,
        "unreachable": unreachable,
    }
    return render(request, "web/node.html", context)


@require_POST
@operator_only
def node_kill(request: HttpRequest, name: str) -> HttpResponse:
    """KILL (the session) or KILL QUERY (its statement) of one of the node's client sessions."""
    node = get_object_or_404(ProxyNode, name=name)
    session = request.POST.get("session", "")
    query_only = request.POST.get("what") == "query"
    what = "KILL QUERY" if query_only else "KILL"
    if not session.isdigit():
        messages.error(request, f"{what}: no session id given")
        return redirect("web:node", name=name)
    try:
        answer = nodeadmin.kill(node, int(session), query_only)
    except nodeadmin.NodeUnreachable as error:
        messages.error(request, f"{what} {session} on {node}: {error}")
        return redirect("web:node", name=name)
    audit.record(
        request.user,
        AuditEntry.Action.KILL,
        cluster=node.cluster,
        table="processlist",
        object_key=f"{node.name} session {session}",
        after={"what": what, "ok": bool(answer.get("ok")), "error": str(answer.get("error") or "")},
    )
    if answer.get("ok"):
        told = "its statement was interrupted" if query_only else "its client was told 1927 Connection was killed"
        messages.success(request, f"{what} {session} on {node}: done, {told}.")
    else:
        messages.error(request, f"{what} {session} on {node}: {answer.get('error')}")
    return redirect("web:node", name=name)

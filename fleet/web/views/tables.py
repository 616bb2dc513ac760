"""The table pages: list, add, edit and delete rows of the working cluster's draft (through fleet.core.drafts)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from fleet.core import publishing
from fleet.core.drafts import delete_row, save_row
from fleet.core.models import Cluster, ClusterRow, ConfigVersion, PgsqlQueryRule, ProxyNode, QueryRule
from fleet.core.stats import read_section
from fleet.web.access import current_cluster, operator_only, viewer_page
from fleet.web.forms import show_model_errors
from fleet.web.forms.rows import row_form
from fleet.web.pages import TablePage, table_page
from proxyapp.config.document import pgsql_rule_as_mysql, table_columns, validate_row
from proxyapp.config.rulecheck import shadowed_rules
from proxyapp.config.tables import MysqlQueryRule
from proxyapp.config.tables import PgsqlQueryRule as PgsqlRuleRow
from proxyapp.report.reader import read_rule_hits

#: Rows a table page lists at once (``?page=`` for the rest).
PAGE_SIZE = 100
#: The query rule tables, whose pages flag the rules that can never match.
RULE_MODELS = (QueryRule, PgsqlQueryRule)


def _row(page: TablePage, cluster: Cluster | None, pk: int) -> models.Model:
    """The row ``pk`` of ``page``'s table in ``cluster``; 404 when it is not there."""
    return get_object_or_404(page.model, pk=pk, cluster=cluster)


@viewer_page
def table_list(request: HttpRequest, slug: str) -> HttpResponse:
    """One table of the working cluster's draft, ``PAGE_SIZE`` rows a page, searched with ``?q=``."""
    page = table_page(slug)
    cluster = current_cluster(request)
    search = request.GET.get("q", "")
    rows = page.search(page.model.objects.filter(cluster=cluster), search)
    rows = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    problems: list[str] = []
    context = {
        "page": page,
        "cluster": cluster,
        "rows": rows,
        "search": search,
        "query": urlencode({"q": search}) if search else "",
        "rule_page": page.model in RULE_MODELS,
        "rule_hits": rule_hits(cluster, problems) if page.model is QueryRule else None,
        "shadowed": shadowed(cluster, page.model) if page.model in RULE_MODELS else {},
        "report_problems": problems,
    }
    return render(request, "web/table_list.html", context)


def shadowed(cluster: Cluster | None, model: type[ClusterRow]) -> dict[int, int]:
    """rule_id -> the earlier rule that keeps it from ever matching (``proxyapp.config.rulecheck.shadowed_rules``),
    among ``model``'s rows (MySQL's or PostgreSQL's query rules, read as the rule engine reads them)."""
    rules = []
    for row in model.objects.filter(cluster=cluster):
        rule, _ = validate_row(model.table, row.as_row())
        if isinstance(rule, PgsqlRuleRow):
            rule = pgsql_rule_as_mysql(rule)
        if isinstance(rule, MysqlQueryRule):
            rules.append(rule)
    return dict(shadowed_rules(rules))


def rule_hits(cluster: Cluster | None, problems: list[str]) -> dict[int, list[tuple[str, int]]]:
    """Draft rule_id -> [(node, hits)] from each node's last report (ProxySQL's stats_mysql_query_rules, per node):
    a node counts hits by the rule_ids of the version it runs, each shown on the draft's rule that is the same
    rule (``same_rules``), whatever its number now; a node whose hits do not read is left out, named in
    ``problems``."""
    draft = _rules(QueryRule.objects.filter(cluster=cluster).values())
    nodes = ProxyNode.objects.filter(cluster=cluster).order_by("name")
    running = {
        (version.number, version.checksum): _rules(version.document.get("mysql_query_rules", []))
        for version in ConfigVersion.objects.filter(
            cluster=cluster, number__in=nodes.values_list("applied_version", flat=True)
        )
    }
    hits: dict[int, list[tuple[str, int]]] = {}
    for name, report, number, checksum in nodes.values_list(
        "name", "last_report", "applied_version", "applied_checksum"
    ):
        ran = running.get((number, checksum))
        to_draft = same_rules(ran, draft) if ran is not None else {rule.rule_id: rule.rule_id for rule in draft}
        for row in read_section(read_rule_hits, report, [], problems, name):
            if row.rule_id in to_draft:
                hits.setdefault(to_draft[row.rule_id], []).append((name, row.hits))
    return hits


def _rules(rows: Iterable[Mapping[str, Any]]) -> list[MysqlQueryRule]:
    """The rows that read as query rules (a draft row that does not is refused at publish)."""
    names = set(table_columns("mysql_query_rules"))
    rules = [validate_row("mysql_query_rules", {k: v for k, v in row.items() if k in names})[0] for row in rows]
    return [rule for rule in rules if isinstance(rule, MysqlQueryRule)]


def same_rules(old: list[MysqlQueryRule], new: list[MysqlQueryRule]) -> dict[int, int]:
    """old rule_id -> new rule_id of the same rule: first the rules that differ only in their number (renumbered),
    then, among the rest, those that kept their number (edited in place)."""
    unmatched = {rule.rule_id: rule for rule in new}
    by_content: dict[MysqlQueryRule, list[int]] = {}
    for rule in sorted(new, key=lambda rule: rule.rule_id):
        by_content.setdefault(dataclasses.replace(rule, rule_id=1), []).append(rule.rule_id)
    found: dict[int, int] = {}
    for rule in sorted(old, key=lambda rule: rule.rule_id):
        same = by_content.get(dataclasses.replace(rule, rule_id=1))
        if same:
            found[rule.rule_id] = same.pop(0)
            del unmatched[found[rule.rule_id]]
    for rule in old:
        if rule.rule_id not in found and rule.rule_id in unmatched:
            found[rule.rule_id] = unmatched.pop(rule.rule_id).rule_id
    return found


@operator_only
def row_edit(request: HttpRequest, slug: str, pk: int | None = None) -> HttpResponse:
    """Add a row (no ``pk``) or edit one; the model's validation errors show next to their fields."""
    page = table_page(slug)
    cluster = current_cluster(request)
    if cluster is None:
        messages.error(request, "There is no cluster yet: create one first.")
        return redirect("web:table_list", slug=slug)
    instance = _row(page, cluster, pk) if pk is not None else page.model(cluster=cluster)
    form_class = row_form(page.model)
    # A new row may start from values in the link (``?digest=0x...``: the digests page's "make a rule").
    initial = {k: v for k, v in request.GET.items() if k in form_class.base_fields} if pk is None else {}
    form = form_class(request.POST if request.method == "POST" else None, instance=instance, initial=initial)
    if form.is_bound and form.is_valid():
        before = publishing.draft_warnings(cluster)
        try:
            row = save_row(form.save(commit=False), request.user)
        except ValidationError as error:
            show_model_errors(form, error)
        else:
            messages.success(request, f"Saved {row} in the draft.")
            for warning in publishing.draft_warnings(cluster):  # what publishing will warn of that this save caused
                if warning not in before:
                    messages.warning(request, f"Warning: {warning}.")
            return redirect("web:table_list", slug=slug)
    return render(request, "web/row_form.html", {"page": page, "cluster": cluster, "form": form, "row": instance})


@require_POST
@operator_only
def row_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Delete one row from the draft."""
    page = table_page(slug)
    row = _row(page, current_cluster(request), pk)
    delete_row(row, request.user)
    messages.success(request, f"Deleted {row} from the draft.")
    return redirect("web:table_list", slug=slug)

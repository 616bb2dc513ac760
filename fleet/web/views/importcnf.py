"""Importing a ProxySQL ``proxysql.cnf`` into the working cluster's draft (operators): the same import and the same
report of what was left out as ``manage.py fleetconfig import-cnf`` and ``POST /api/v1/import-cnf/``."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core.proxysql_cnf import import_cnf
from fleet.web.access import current_cluster, operator_only
from fleet.web.forms.tools import CnfForm
from proxyapp.config.document import ConfigError


@operator_only
def import_page(request: HttpRequest) -> HttpResponse:
    """The form; once posted, the import's result: the rows now in the draft and every note, or the refusals."""
    cluster = current_cluster(request)
    form = CnfForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    notes: list[str] = []
    rows: dict[str, int] = {}
    if cluster is not None and form.is_bound and form.is_valid():
        try:
            config, notes = import_cnf(cluster, form.cnf(), request.user, force=form.cleaned_data["force"])
        except forms.ValidationError as error:
            errors = list(error.messages)
        except ConfigError as error:
            errors = error.errors
        else:
            rows = {table: len(table_rows) for table, table_rows in config.to_document().items()}
            messages.success(request, f"Imported into the draft of {cluster}: review it on the publish page.")
    context = {"cluster": cluster, "form": form, "errors": errors, "notes": notes, "rows": rows}
    return render(request, "web/import_cnf.html", context)

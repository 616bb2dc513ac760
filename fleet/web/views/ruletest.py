"""The rule tester page: one query through the draft's or a published version's rules (``fleet.core.ruletest``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core import ruletest
from fleet.core.ruletest import config_of
from fleet.web.access import current_cluster, viewer_page
from fleet.web.forms.tools import RuleTestForm
from proxyapp.config.document import ConfigError


@viewer_page
def rule_test(request: HttpRequest) -> HttpResponse:
    """The form, and once submitted (a GET, so a trial can be linked to), the trial's result."""
    cluster = current_cluster(request)
    form = RuleTestForm(request.GET or None, cluster=cluster)
    trial = None
    errors: list[str] = []
    if cluster is not None and form.is_valid():
        data = form.cleaned_data
        try:
            config = config_of(cluster, data["source"])
            trial = ruletest.try_query(
                config,
                data["query"],
                username=data["username"],
                schemaname=data["schemaname"] or "",
                client_addr=data["client_addr"] or "127.0.0.1",
                flag_in=data["flag_in"] or 0,
                engine=data["engine"] or ruletest.MYSQL,
            )
        except ConfigError as error:
            errors = error.errors
        except ValueError as error:  # a rule the engine refuses, as a node would
            errors = [str(error)]
    context = {"cluster": cluster, "form": form, "trial": trial, "errors": errors}
    return render(request, "web/rule_test.html", context)

"""The rule tester page: one query through the draft's or a published version's rules (``fleet.core.ruletest``)."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core import ruletest
from fleet.core.models import Cluster, ConfigVersion
from fleet.core.ruletest import DRAFT, config_of
from fleet.web.access import current_cluster, viewer_page
from proxyapp.config.document import ConfigError


class RuleTestForm(forms.Form):
    """What to try: the query, the session it comes from, and which config's rules."""

    query = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), max_length=100_000)
    username = forms.CharField(max_length=255)
    schemaname = forms.CharField(max_length=255, required=False)
    client_addr = forms.CharField(max_length=255, required=False, initial="127.0.0.1")
    flag_in = forms.IntegerField(min_value=0, initial=0, required=False)
    source = forms.ChoiceField(choices=[(DRAFT, "the draft")])

    def __init__(self, *args: object, cluster: Cluster | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if cluster is not None:
            numbers = ConfigVersion.objects.filter(cluster=cluster).order_by("-number").values_list("number", flat=True)
            self.fields["source"].choices = [(DRAFT, "the draft"), *((str(n), f"version {n}") for n in numbers[:50])]


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
            )
        except ConfigError as error:
            errors = error.errors
        except ValueError as error:  # a rule the engine refuses, as a node would
            errors = [str(error)]
    context = {"cluster": cluster, "form": form, "trial": trial, "errors": errors}
    return render(request, "web/rule_test.html", context)

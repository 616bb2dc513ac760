"""Importing a ProxySQL ``proxysql.cnf`` into the working cluster's draft (operators): the same import and the same
report of what was left out as ``manage.py fleetconfig import-cnf`` and ``POST /api/v1/import-cnf/``."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core.proxysql_cnf import import_cnf
from fleet.web.access import current_cluster, operator_only
from proxyapp.config.document import ConfigError

#: The largest cnf file accepted.
MAX_CNF_BYTES = 10_000_000


class CnfForm(forms.Form):
    """A cnf file, uploaded or pasted."""

    file = forms.FileField(required=False)
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 12, "cols": 100}), required=False)
    force = forms.BooleanField(required=False, label="drop what ProxyFleet lacks even if routing changes")

    def cnf(self) -> str:
        """The cnf's text (the file wins); ValidationError when there is none or it is not UTF-8 text."""
        upload = self.cleaned_data.get("file")
        if upload is not None:
            if upload.size > MAX_CNF_BYTES:
                raise forms.ValidationError(f"the file is over {MAX_CNF_BYTES} bytes")
            try:
                return upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("the file is not UTF-8 text") from None
        if not self.cleaned_data.get("text", "").strip():
            raise forms.ValidationError("upload a proxysql.cnf or paste its text")
        return self.cleaned_data["text"]


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

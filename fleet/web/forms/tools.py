"""The tools' forms: a ProxySQL cnf to import, and a query to try against a config's rules."""

from __future__ import annotations

from django import forms

from fleet.core.models import Cluster, ConfigVersion
from fleet.core.ruletest import DRAFT

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

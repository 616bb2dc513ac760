"""The tools' forms: a ProxySQL cnf to import, a query to try against a config's rules, and a key to locate in a
config's shard map."""

from __future__ import annotations

from django import forms

from fleet.core.models import Cluster, ConfigVersion
from fleet.core.ruletest import DRAFT, MYSQL, PGSQL

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
    """What to try: the query, the session it comes from, which rules (MySQL's or PostgreSQL's) and which config's."""

    query = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), max_length=100_000)
    engine = forms.ChoiceField(
        choices=[(MYSQL, "MySQL: mysql_query_rules"), (PGSQL, "PostgreSQL: pgsql_query_rules")],
        required=False,
        label="rules",
    )
    username = forms.CharField(max_length=255)
    schemaname = forms.CharField(max_length=255, required=False, label="schemaname (a PostgreSQL rule's database)")
    client_addr = forms.CharField(max_length=255, required=False, initial="127.0.0.1")
    flag_in = forms.IntegerField(min_value=0, initial=0, required=False)
    source = forms.ChoiceField(choices=[(DRAFT, "the draft")])

    def __init__(self, *args: object, cluster: Cluster | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["source"].choices = source_choices(cluster)


class ShardLocateForm(forms.Form):
    """Which config's shard map to show, and the tester's question: which shard holds ``key`` of ``table``."""

    source = forms.ChoiceField(choices=[(DRAFT, "the draft")], required=False)
    table = forms.CharField(max_length=200, required=False, help_text="schema.table")
    key = forms.CharField(max_length=255, required=False, help_text="digits: an integer; anything else: a string")

    def __init__(self, *args: object, cluster: Cluster | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["source"].choices = source_choices(cluster)

    def asks(self) -> bool:
        """Whether the tester was asked something (a table or a key given)."""
        return bool(self.cleaned_data.get("table") or self.cleaned_data.get("key"))


def source_choices(cluster: Cluster | None) -> list[tuple[str, str]]:
    """The configs a tool may read: the draft, then the cluster's latest 50 published versions."""
    if cluster is None:
        return [(DRAFT, "the draft")]
    numbers = ConfigVersion.objects.filter(cluster=cluster).order_by("-number").values_list("number", flat=True)
    return [(DRAFT, "the draft"), *((str(n), f"version {n}") for n in numbers[:50])]

"""Forms for what is saved through ``fleet.core.drafts.save_row``: table rows (generated from the models), clusters
and nodes; secrets (passwords, password variables) are write-only."""

from __future__ import annotations

from functools import cache
from typing import Any

from django import forms
from django.db import models

from fleet.core.models import Cluster, ProxyNode
from proxyapp.config.secrets import is_secret


class RowForm(forms.ModelForm):
    """A row's form. A secret field (as ``sealing.is_secret`` decides, for the stored row or the submitted one, and
    the form's ``write_only`` fields) is a password input that never shows a value; left blank, it keeps the stored
    value."""

    write_only: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        table = getattr(self._meta.model, "table", "")
        row = {name: getattr(self.instance, name, None) for name in self.fields}
        if self.is_bound:
            row.update({name: self.data.get(name) for name in self.fields if name in self.data})
        self.secret_fields = [name for name in self.fields if is_secret(table, row, name) or name in self.write_only]
        for name in self.secret_fields:
            field = self.fields[name]
            field.widget = forms.PasswordInput(render_value=False)
            field.required = False
            field.help_text = "write-only" + ("; leave blank to keep the current value" if self.instance.pk else "")

    def clean(self) -> dict[str, Any]:
        """Blank secrets keep the instance's current value."""
        cleaned = super().clean()
        for name in self.secret_fields:
            if not cleaned.get(name):
                cleaned[name] = getattr(self.instance, name)
        return cleaned


def _form_field(field: models.Field, **kwargs: Any) -> forms.Field | None:
    """One-line inputs for free-text columns; a blank nullable field is null (as the proxy reads a blank)."""
    if isinstance(field, models.TextField | models.CharField) and field.null:
        kwargs.setdefault("empty_value", None)
    if isinstance(field, models.TextField) and not field.choices:
        return field.formfield(widget=forms.TextInput, **kwargs)
    return field.formfield(**kwargs)


@cache
def row_form(model: type[models.Model]) -> type[RowForm]:
    """The form class for ``model``'s rows: every column except the cluster (the page's cluster)."""
    return forms.modelform_factory(model, form=RowForm, exclude=["cluster"], formfield_callback=_form_field)


class ClusterForm(RowForm):
    """A cluster's name and comment."""

    class Meta:
        model = Cluster
        fields = ["name", "comment"]


class NodeForm(RowForm):
    """A node's name (fixed once it exists: it names the node's queue), cluster and addresses."""

    class Meta:
        model = ProxyNode
        fields = ["name", "cluster", "mysql_address", "admin_address", "admin_token"]

    write_only = ("admin_token",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if self.instance.pk:
            self.fields["name"].disabled = True

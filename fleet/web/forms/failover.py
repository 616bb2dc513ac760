"""The failover pages' form: a hostgroup's failover settings."""

from __future__ import annotations

from typing import Any

from django import forms

from fleet.failover.models import FailoverPolicy
from fleet.failover.policies import EDITABLE


class PolicyForm(forms.ModelForm):
    """A hostgroup's failover settings; the passwords are write-only (left blank, they keep their value)."""

    class Meta:
        model = FailoverPolicy
        fields = list(EDITABLE)
        widgets = {
            "admin_password": forms.PasswordInput(render_value=False),
            "replication_password": forms.PasswordInput(render_value=False),
            "promotion_order": forms.TextInput,
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in FailoverPolicy.SECRETS:
            self.fields[name].required = False
            self.fields[name].help_text = "write-only; leave blank to keep the current value"

    def clean(self) -> dict[str, Any]:
        """Blank passwords keep the stored ones."""
        cleaned = super().clean()
        for name in FailoverPolicy.SECRETS:
            if not cleaned.get(name):
                cleaned[name] = getattr(self.instance, name)
        return cleaned

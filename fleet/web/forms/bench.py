"""The benchmark pages' forms: a target (its password write-only) and a job (its targets named in order)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from fleet.bench.engine.plans import workload_names
from fleet.bench.engine.workloads import BUILTINS
from fleet.bench.models import BenchJob, BenchTarget


class TargetForm(forms.ModelForm):
    """A target; the password is never shown and, left blank, kept."""

    password = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False), strip=False)

    class Meta:
        model = BenchTarget
        fields = ["name", "kind", "host", "port", "user", "password", "database", "safe_for_writes", "cluster", "node"]
        fields += ["comment"]
        widgets = {"comment": forms.TextInput}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["password"].help_text = "write-only" + ("; leave blank to keep it" if self.instance.pk else "")

    def clean_password(self) -> str:
        """A blank password keeps the stored one."""
        return self.cleaned_data.get("password") or (self.instance.password if self.instance.pk else "")


def _workload_choices() -> list[tuple[str, str]]:
    return [(name, f"{name}: {BUILTINS[name].summary}" if name in BUILTINS else name) for name in workload_names()]


class JobForm(forms.ModelForm):
    """A job; ``targets`` names stored targets in order (the first is where setup runs and the baseline)."""

    workload = forms.ChoiceField(choices=_workload_choices)
    targets = forms.CharField(help_text="stored target names, comma-separated, in order: the first is the baseline")

    class Meta:
        model = BenchJob
        fields = [
            "name", "cluster", "workload", "script", "targets", "connections", "duration", "events", "warmup", "rate",
            "interval", "rounds", "rows", "batch", "processes", "time_limit", "schedule", "enabled",
        ]  # fmt: skip
        widgets = {"script": forms.Textarea(attrs={"rows": 14, "cols": 90, "class": "code"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["targets"] = ", ".join(t.name for t in self.instance.ordered_targets())
        names = ", ".join(BenchTarget.objects.values_list("name", flat=True)) or "none yet: add one first"
        self.fields["targets"].help_text += f" (stored: {names})"

    def clean_targets(self) -> list[BenchTarget]:
        """The named targets, in order; an error naming the first unknown one."""
        names = [n.strip() for n in self.cleaned_data["targets"].split(",") if n.strip()]
        found = {t.name: t for t in BenchTarget.objects.filter(name__in=names)}
        missing = [n for n in names if n not in found]
        if missing:
            raise ValidationError(f"no target named {missing[0]!r}")
        return [found[n] for n in names]

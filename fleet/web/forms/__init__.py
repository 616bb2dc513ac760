"""The web UI's forms, in one place: ``rows`` (table rows, clusters and nodes, saved through the drafts), ``bench``
(benchmark targets and jobs), ``failover`` (a hostgroup's failover settings) and ``tools`` (the cnf import and the
rule tester)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


def show_model_errors(form: forms.BaseForm, error: ValidationError) -> None:
    """Put a model's ValidationError (from its full_clean) next to its fields, the rest above the form."""
    by_field = error.message_dict if hasattr(error, "error_dict") else {NON_FIELD_ERRORS: error.messages}
    for name, messages in by_field.items():
        form.add_error(name if name in form.fields else None, messages)

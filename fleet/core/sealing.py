"""Secrets at rest: MySQL passwords are sealed (encrypted and authenticated) in the control plane's database with a
key kept outside it.

A sealed value is ``sealed:`` followed by a Fernet token (AES-128-CBC with HMAC-SHA256, from ``cryptography``).
The key comes from ``FLEET_SEALING_KEY`` (the key itself, e.g. from a secret store) or else the file
``FLEET_SEALING_KEY_FILE`` (default ``var/sealing.key``), made on first use, readable by its owner only. The file
may hold several keys, one per line: the first seals, all of them open (``manage.py sealing rotate`` moves every
value to a new key). A value that is not sealed (written before sealing existed) reads as it is and is sealed the
next time it is saved, or by ``manage.py sealing seal``.

The fields below seal on the way into the database and open on the way out, so every other part of the control
plane sees the password as it was typed, and a copy of the database (a backup, a dump, a stolen file) does not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import connection, models, transaction

from fleet.core import keyfiles

# The secrets of a config (users' passwords, password variables) are proxyapp's definition: the node masks the same.
from proxyapp.config.secrets import MASK, is_secret, is_secret_variable, mask_document

PREFIX = "sealed:"


class SealingError(RuntimeError):
    """A sealed value cannot be opened with the keys configured, or the key setting is unusable."""


def key_file() -> Path:
    """The file the keys are kept in."""
    return Path(settings.FLEET_SEALING_KEY_FILE)


def _read_or_make_keys(path: Path) -> list[str]:
    """The keys in ``path``; a new one written there (owner-only, exclusively) when the file does not exist yet."""
    text = keyfiles.read_or_create(
        path,
        lambda: Fernet.generate_key().decode() + "\n",
        "a new sealing key: keep a copy, sealed passwords cannot be read without it",
    )
    keys = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not keys:
        raise SealingError(f"{path} holds no key")
    return keys


def configured_keys() -> list[str]:
    """The keys, the sealing one first: ``FLEET_SEALING_KEY`` (comma-separated) if set, else the key file's (read
    again only when the file changed: a rotation takes effect at once, a page of passwords reads it once)."""
    given = settings.FLEET_SEALING_KEY
    if given:
        return [k.strip() for k in given.split(",") if k.strip()]
    path = key_file()
    try:
        seen = path.stat()
    except FileNotFoundError:
        return _read_or_make_keys(path)
    return list(_file_keys(str(path), seen.st_mtime_ns, seen.st_size))


@cache
def _file_keys(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The keys of the file at ``path`` as it was at that modification time and size."""
    return tuple(_read_or_make_keys(Path(path)))


@cache
def _box(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError) as exc:
        raise SealingError(f"a sealing key is not a Fernet key (32 url-safe base64-encoded bytes): {exc}") from None


def box() -> MultiFernet:
    """The Fernet set for the configured keys."""
    return _box(tuple(configured_keys()))


def is_sealed(value: object) -> bool:
    """Whether ``value`` is a sealed string."""
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(value: str) -> str:
    """``value`` sealed with the first key; an empty or already sealed value is returned as it is."""
    if not value or is_sealed(value):
        return value
    return PREFIX + box().encrypt(value.encode("utf-8")).decode("ascii")


def unseal(value: Any) -> Any:
    """The text a sealed ``value`` holds; anything else (not sealed, not a string) is returned as it is."""
    if not is_sealed(value):
        return value
    try:
        return box().decrypt(value[len(PREFIX) :].encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        where = "FLEET_SEALING_KEY" if settings.FLEET_SEALING_KEY else str(key_file())
        raise SealingError(f"a sealed password cannot be opened with the keys in {where}: wrong or lost key") from None


def map_document_secrets(document: Any, change: Callable[[Any], Any]) -> Any:
    """A copy of a config document with ``change`` applied to every secret in it: each user's ``password`` and
    each ``*_password`` variable's value. Anything that is not a document is returned as it is."""
    if not isinstance(document, Mapping):
        return document
    return {
        table: list(_map_rows(table, rows, change)) if isinstance(rows, list) else rows
        for table, rows in document.items()
    }


def _map_rows(table: str, rows: list[Any], change: Callable[[Any], Any]) -> Iterator[Any]:
    for row in rows:
        if isinstance(row, Mapping):
            row = {k: change(v) if is_secret(table, row, k) else v for k, v in row.items()}
        yield row


class _Opens:
    """Opens sealed values read from the database."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unseal(value)


class SealedTextField(_Opens, models.TextField):
    """A text column whose every value is sealed in the database (a password)."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return seal(value) if isinstance(value, str) else value


class SealedIfPasswordVariableField(_Opens, models.TextField):
    """A global variable's value: sealed when the row's ``variable_name`` names a password."""

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = super().pre_save(model_instance, add)
        if isinstance(value, str) and is_secret_variable(getattr(model_instance, "variable_name", "")):
            return seal(value)
        return value


class SealedDocumentField(models.JSONField):
    """A config document whose secrets (users' passwords, password variables) are sealed in the database."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(map_document_secrets(value, lambda v: seal(v) if isinstance(v, str) else v))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return map_document_secrets(super().from_db_value(value, expression, connection), unseal)


_SEALED_FIELDS = (SealedTextField, SealedIfPasswordVariableField, SealedDocumentField)


def shown(instance: models.Model, field: models.Field[Any, Any], value: Any) -> Any:
    """``value`` of ``instance``'s ``field`` fit to show (an audit entry, a page): a sealed field is a secret, so a
    sealed text is masked, a password variable's value too, and a sealed document's secrets."""
    if isinstance(field, SealedTextField) or (
        isinstance(field, SealedIfPasswordVariableField) and is_secret_variable(getattr(instance, "variable_name", ""))
    ):
        return MASK if value else value
    if isinstance(field, SealedDocumentField) and isinstance(value, Mapping):
        return mask_document(value)
    return value


def sealed_fields(registry: Any, app_label: str = "") -> Iterator[tuple[type[models.Model], list[str]]]:
    """Every model of ``registry`` (Django's app registry, or a migration's), or of its app ``app_label``, with its
    sealed fields' names."""
    for model in registry.get_app_config(app_label).get_models() if app_label else registry.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, _SEALED_FIELDS)]
        if names:
            yield model, names


def seal_all(registry: Any, app_label: str = "") -> int:
    """Save every row that has a sealed field again (in one transaction), so each of its secrets is sealed with the
    first key (values written before sealing, or sealed with an older key); the number of rows saved."""
    saved = 0
    with transaction.atomic():
        for model, names in sealed_fields(registry, app_label):
            for row in model._base_manager.iterator():
                row.save(update_fields=names)
                saved += 1
    return saved


def seal_in_migration(app_label: str) -> Callable[[Any, Any], None]:
    """A migration's forward step that seals the plain secrets ``app_label``'s rows hold (``seal_all``)."""

    def forward(apps: Any, schema_editor: Any) -> None:
        seal_all(apps, app_label)

    return forward


def count_values(registry: Any) -> tuple[int, int]:
    """How many secrets are stored sealed and how many as plain text, read as the database holds them (raw), each
    sealed one opened to check the keys; raises ``SealingError`` for one that does not open."""
    counts = {True: 0, False: 0}

    def tally(value: Any) -> Any:
        if isinstance(value, str) and value:
            unseal(value)
            counts[is_sealed(value)] += 1
        return value

    for model, names in sealed_fields(registry):
        fields = [model._meta.get_field(name) for name in names]
        selected = [
            *names,
            *(["variable_name"] if any(isinstance(f, SealedIfPasswordVariableField) for f in fields) else []),
        ]
        columns = ", ".join(connection.ops.quote_name(model._meta.get_field(n).column) for n in selected)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {columns} FROM {connection.ops.quote_name(model._meta.db_table)}")
            for raw in cursor.fetchall():
                for field, value in zip(fields, raw, strict=False):
                    if isinstance(field, SealedDocumentField):
                        map_document_secrets(json.loads(value) if isinstance(value, str) else value, tally)
                    elif not isinstance(field, SealedIfPasswordVariableField) or is_secret_variable(raw[-1]):
                        tally(value)
    return counts[True], counts[False]


def rotate_key_file(registry: Any) -> Path:
    """Put a new key first in the key file, seal every secret with it, then drop the old keys; the file.

    Until every value is sealed again the old keys stay in the file, so an interrupted rotation loses nothing."""
    if settings.FLEET_SEALING_KEY:
        raise SealingError(
            "the keys come from FLEET_SEALING_KEY: put a new key first there (new,old), run 'sealing seal', "
            "then remove the old one"
        )
    path = key_file()
    old = configured_keys()
    new = Fernet.generate_key().decode()
    _write_keys(path, [new, *old])
    seal_all(registry)
    _write_keys(path, [new])
    return path


def _write_keys(path: Path, keys: list[str]) -> None:
    """Replace the key file, owner-only, atomically."""
    tmp = path.with_name(path.name + ".new")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="ascii") as f:
        f.write("".join(key + "\n" for key in keys))
    tmp.replace(path)

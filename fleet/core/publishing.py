"""Publishing a cluster's draft (ProxySQL's LOAD ... TO RUNTIME): compile, validate, version, diff, roll back,
import and export.

The draft is every table model's rows for a cluster; compiled, it is the proxy's config document, validated by the
proxy's own ``parse_config`` (its rule engine's checks among them) so that publishing refuses exactly what a node
would. A published ``ConfigVersion`` keeps the canonical document (``Config.to_document()``) with the real
passwords, because that is what nodes run; everything shown to a user (row changes, unified diffs, masked exports)
goes through ``mask_row``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from fleet.core import audit, push
from fleet.core.drafts import Actor
from fleet.core.models import TABLE_MODELS, AuditEntry, Cluster, ClusterRow, ConfigVersion, Hostgroup
from proxyapp.config.document import UNIQUE_KEYS, Config, ConfigError, parse_config, table_columns
from proxyapp.config.secrets import MASK, is_secret, mask_document, mask_row
from proxyapp.config.variables import VARIABLES

#: A config document: table name -> list of rows (column name -> value).
Document = dict[str, list[dict[str, Any]]]
#: A document as given to the diff functions (a stored version's, or one compiled from the draft).
DocumentIn = Mapping[str, list[dict[str, Any]]]

# global_variables rows whose value is a credential (mysql-monitor_password) are masked like passwords.


class NothingToPublish(Exception):
    """The draft is the same config as the latest version."""


class NothingToDiscard(Exception):
    """The draft is the latest version's config, or nothing is published to go back to (the message says which)."""


class DraftChanged(Exception):
    """The draft is not the one its publisher previewed: someone changed it since (the message says who, when)."""


@dataclass(frozen=True)
class RowChange:
    """One row added, removed or changed between two documents; secrets in ``before``/``after`` are masked."""

    table: str
    key: str
    kind: str  # "added", "removed" or "changed"
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()


# --- masking ------------------------------------------------------------------------------------------------


# --- the draft ----------------------------------------------------------------------------------------------


def draft_document(cluster: Cluster) -> Document:
    """The cluster's draft rows as a config document, unvalidated, with the real passwords."""
    return {
        table: [row.as_row() for row in model.objects.filter(cluster=cluster).order_by(*model.key_columns)]
        for table, model in TABLE_MODELS.items()
    }


def compile_draft(cluster: Cluster) -> Config:
    """The draft validated by the proxy's ``parse_config``; ConfigError names each bad row and column."""
    return parse_config(draft_document(cluster))


def export_document(cluster: Cluster, *, secrets: bool = True) -> Document:
    """The draft as a config document to save and import again; ``secrets=False`` masks the passwords."""
    document = draft_document(cluster)
    return document if secrets else mask_document(document)


def import_document(cluster: Cluster, document: object, user: Actor) -> Config:
    """Replace the cluster's draft with ``document``, all or nothing, audited as one IMPORT.

    The document is validated first (ConfigError naming row and column, and nothing changes). A secret given as the
    mask (a masked export's user passwords and password variables) keeps the value the draft has for that row.
    """
    if isinstance(document, Mapping):
        document = _unmask_secrets(cluster, document)
    config = parse_config(document)
    with transaction.atomic():
        before = mask_document(draft_document(cluster))
        _replace_draft(cluster, config)
        audit.record(
            user,
            AuditEntry.Action.IMPORT,
            cluster=cluster,
            object_key=f"checksum {config.checksum[:12]}",
            before=before,
            after=mask_document(config.to_document()),
        )
    return config


def _unmask_secrets(cluster: Cluster, document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with each masked secret replaced by the value the draft's row with the same key holds;
    ConfigError naming the row and column when the draft has no such row."""
    draft = draft_document(cluster)
    result, errors = dict(document), []
    for table, rows in document.items():
        if table not in TABLE_MODELS or not isinstance(rows, list):
            continue
        defaults = {n: c.default for n, c in table_columns(table).items() if c.default is not dataclasses.MISSING}
        known = {_row_key(table, row): row for row in draft[table]}
        unmasked = []
        for index, row in enumerate(rows):
            masked = (
                [c for c, v in row.items() if v == MASK and is_secret(table, row, c)]
                if isinstance(row, Mapping)
                else []
            )
            if masked:
                full = {**defaults, **row}
                old = known.get(_row_key(table, full))
                if old is None:
                    errors.extend(
                        f"{table}[{index}] ({_key_text(table, full)}): {column}: the mask {MASK!r} stands for "
                        "the value the draft already has, but the draft has no such row; give the value"
                        for column in masked
                    )
                else:
                    row = {**row, **{column: old[column] for column in masked}}
            unmasked.append(row)
        result[table] = unmasked
    if errors:
        raise ConfigError(errors)
    return result


def has_unpublished_edits(cluster: Cluster) -> bool:
    """Whether the draft differs from the latest version's config (an invalid draft does; with nothing published,
    a draft with any row does)."""
    latest = cluster.latest_version()
    try:
        checksum = compile_draft(cluster).checksum
    except ConfigError:
        return True
    return checksum != (latest.checksum if latest is not None else parse_config({}).checksum)


def discard_draft(cluster: Cluster, user: Actor) -> ConfigVersion:
    """Put the latest version's config back in the draft, dropping every unpublished edit, audited; returns that
    version. NothingToDiscard when nothing is published or the draft has no unpublished edits."""
    latest = cluster.latest_version()
    if latest is None:
        raise NothingToDiscard("nothing is published yet: there is no version to go back to")
    if not has_unpublished_edits(cluster):
        raise NothingToDiscard(f"the draft is version {latest.number}'s config: it has no unpublished edits")
    with transaction.atomic():
        before = mask_document(draft_document(cluster))
        _replace_draft(cluster, parse_config(latest.document))
        audit.record(
            user,
            AuditEntry.Action.DISCARD,
            cluster=cluster,
            object_key=f"draft back to version {latest.number}",
            before=before,
            after=mask_document(latest.document),
        )
    return latest


def _replace_draft(cluster: Cluster, config: Config) -> None:
    """Delete every draft row of ``cluster`` and write ``config``'s rows instead (call inside a transaction)."""
    document = config.to_document()
    new_rows: dict[type[ClusterRow], list[ClusterRow]] = {}
    errors = []
    for table, model in TABLE_MODELS.items():
        rows = new_rows.setdefault(model, [])
        for index, values in enumerate(document.get(table, [])):
            obj = model(cluster=cluster, **values)
            try:
                obj.clean_fields(exclude=["cluster"])  # the model's own limits (lengths); the proxy's checks passed
            except ValidationError as error:
                errors.extend(
                    f"{table}[{index}] ({obj.key()}): {column}: {message}"
                    for column, messages in error.message_dict.items()
                    for message in messages
                )
            rows.append(obj)
    if errors:
        raise ConfigError(errors)
    for model, rows in new_rows.items():
        model.objects.filter(cluster=cluster).delete()
        model.objects.bulk_create(rows)
    ensure_hostgroups(cluster, config)


def ensure_hostgroups(cluster: Cluster, config: Config) -> None:
    """Create a (nameless) ``Hostgroup`` row for every hostgroup ``config`` uses that has none yet."""
    existing = set(Hostgroup.objects.filter(cluster=cluster).values_list("hostgroup_id", flat=True))
    Hostgroup.objects.bulk_create(
        Hostgroup(cluster=cluster, hostgroup_id=number) for number in sorted(config.hostgroups() - existing)
    )


# --- publishing ---------------------------------------------------------------------------------------------


def publish(cluster: Cluster, user: Actor, comment: str = "", previewed: str = "") -> ConfigVersion:
    """Validate the draft and store it as the cluster's next version; it is pushed to the nodes after commit.

    ConfigError (naming rows and columns) for an invalid draft, NothingToPublish when the draft is the latest
    version's config, DraftChanged when ``previewed`` (the checksum of the draft its publisher saw) is given and
    the draft is no longer that one.
    """
    return _publish(cluster, user, comment, rollback_of=None, previewed=previewed)


def rollback(version: ConfigVersion, user: Actor, comment: str = "") -> ConfigVersion:
    """Copy ``version``'s document into the draft and publish it as a new version (``rollback_of`` set).

    All or nothing: when publishing is refused (NothingToPublish, ConfigError) the draft is left as it was.
    """
    cluster = version.cluster
    with transaction.atomic():
        _replace_draft(cluster, parse_config(version.document))
        return _publish(cluster, user, comment or f"rollback to version {version.number}", rollback_of=version)


def _publish(
    cluster: Cluster, user: Actor, comment: str, rollback_of: ConfigVersion | None, previewed: str = ""
) -> ConfigVersion:
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()  # one publisher per cluster at a time
        config = compile_draft(cluster)
        if previewed and config.checksum != previewed:
            raise DraftChanged(_changed_since_preview(cluster))
        latest = cluster.latest_version()
        if latest is not None and latest.checksum == config.checksum:
            raise NothingToPublish(f"nothing to publish: the draft is version {latest.number}'s config")
        ensure_hostgroups(cluster, config)
        version = ConfigVersion.objects.create(
            cluster=cluster,
            number=latest.number + 1 if latest is not None else 1,
            document=config.to_document(),
            checksum=config.checksum,
            author=user if user is not None and user.is_authenticated else None,
            comment=comment,
            rollback_of=rollback_of,
        )
        action = AuditEntry.Action.PUBLISH if rollback_of is None else AuditEntry.Action.ROLLBACK
        summary = {"version": version.number, "checksum": version.checksum, "comment": comment}
        if rollback_of is not None:
            summary["rollback_of"] = rollback_of.number
        audit.record(user, action, cluster=cluster, table="version", object_key=str(version.number), after=summary)
        # robust: a broker that is down must not fail a publish that committed; reconcile re-sends later.
        transaction.on_commit(lambda: _deliver(version), robust=True)
    return version


def _changed_since_preview(cluster: Cluster) -> str:
    """Who changed the draft last, and when: the reason a publish of an older preview is refused."""
    edits = (
        AuditEntry.Action.CREATE,
        AuditEntry.Action.UPDATE,
        AuditEntry.Action.DELETE,
        AuditEntry.Action.IMPORT,
        AuditEntry.Action.DISCARD,
    )
    last = AuditEntry.objects.filter(cluster=cluster, action__in=edits).select_related("user").first()
    who = (
        f" by {last.user.get_username() if last.user else 'the system'} at {last.at:%Y-%m-%d %H:%M:%S} UTC"
        if last
        else ""
    )
    return f"the draft changed{who} since it was previewed: review its changes again, then publish"


def _deliver(version: ConfigVersion) -> None:
    """Push ``version`` to its nodes and note on it what kept it from them (``delivery_problem``)."""
    version.delivery_problem = push.push_version(version)


def publish_message(version: ConfigVersion) -> tuple[bool, str]:
    """(delivered, what to tell the person who published ``version``): never a success the nodes did not get."""
    problem = version.delivery_problem
    if problem:
        return False, (
            f"Stored as version {version.number} of {version.cluster}, not delivered: {problem}. The nodes keep "
            "running what they run; the version is sent to them once the broker is back (reconcile)."
        )
    return True, f"Published version {version.number} of {version.cluster}; sending it to its nodes."


# --- diffs --------------------------------------------------------------------------------------------------


def draft_changes(cluster: Cluster) -> list[RowChange]:
    """What publishing the draft would change against the latest version; ConfigError for an invalid draft."""
    return draft_preview(cluster)[0]


def draft_preview(cluster: Cluster) -> tuple[list[RowChange], list[str], str]:
    """``draft_changes``, the warnings a node would log for the draft (a hostgroup with no servers, a variable it
    does not act on) and the draft's checksum (publish with it to refuse a draft changed meanwhile); ConfigError for
    an invalid draft."""
    config = compile_draft(cluster)
    latest = cluster.latest_version()
    document = config.to_document()
    changes = _changes(latest.document if latest is not None else {}, document)
    risks = _publish_risks(latest, document) if latest is not None else []
    return changes, risks + list(config.warnings), config.checksum


#: The variables that say where a node listens for clients.
LISTENER_VARIABLES = ("mysql-interfaces", "pgsql-interfaces", "admin-restapi_interface", "admin-restapi_port")


def _publish_risks(latest: ConfigVersion, new_doc: DocumentIn) -> list[str]:
    """What publishing ``new_doc`` over ``latest`` takes away without a row saying so: a table emptied whole (a
    PostgreSQL table, the shards), a listener's address changed (its clients must move)."""
    old_doc = latest.document
    risks = [
        f"removes the whole of {table}: v{latest.number} has {len(old_doc[table])} row"
        f"{'s' if len(old_doc[table]) != 1 else ''}, this version none"
        for table in TABLE_MODELS
        if old_doc.get(table) and not new_doc.get(table)
    ]

    def variables(doc: DocumentIn) -> dict[str, str]:
        values = {row["variable_name"]: row["variable_value"] for row in doc.get("global_variables", [])}
        return {name: str(values.get(name, VARIABLES[name].default)) for name in LISTENER_VARIABLES}

    old_vars, new_vars = variables(old_doc), variables(new_doc)
    risks += [
        f"{name} changes from {old_vars[name]!r} to {new_vars[name]!r}: clients must connect to the new address"
        for name in LISTENER_VARIABLES
        if old_vars[name] != new_vars[name]
    ]
    old_listeners = {row["port"]: row["interface"] for row in old_doc.get("pgsql_forward_listeners", [])}
    for row in new_doc.get("pgsql_forward_listeners", []):
        before = old_listeners.get(row["port"])
        if before is not None and before != row["interface"]:
            risks.append(
                f"pgsql_forward_listeners port={row['port']}: interface changes from {before!r} to "
                f"{row['interface']!r}: clients must connect to the new address"
            )
    return risks


def draft_warnings(cluster: Cluster) -> list[str]:
    """The warnings a node would log for the draft, as publishing shows them; none while the draft is invalid
    (publishing says why)."""
    try:
        return list(compile_draft(cluster).warnings)
    except ConfigError:
        return []


def diff_versions(old: ConfigVersion, new: ConfigVersion) -> list[RowChange]:
    """The rows added, removed and changed from version ``old`` to version ``new``."""
    return _changes(old.document, new.document)


def _row_key(table: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(column) for column in UNIQUE_KEYS[table][0])


def _key_text(table: str, row: Mapping[str, Any]) -> str:
    return ", ".join(f"{column}={row.get(column)}" for column in UNIQUE_KEYS[table][0])


def _sort_key(key: tuple[Any, ...]) -> tuple[tuple[bool, str, Any], ...]:
    """Orders keys whose parts may be None or of mixed types."""
    return tuple((part is None, type(part).__name__, part if part is not None else 0) for part in key)


def _changes(old_doc: DocumentIn, new_doc: DocumentIn) -> list[RowChange]:
    changes = []
    for table in TABLE_MODELS:
        old = {_row_key(table, row): row for row in old_doc.get(table, [])}
        new = {_row_key(table, row): row for row in new_doc.get(table, [])}
        for key in sorted(old.keys() | new.keys(), key=_sort_key):
            before, after = old.get(key), new.get(key)
            if before is None and after is not None:
                changes.append(RowChange(table, _key_text(table, after), "added", after=mask_row(table, after)))
            elif after is None and before is not None:
                changes.append(RowChange(table, _key_text(table, before), "removed", before=mask_row(table, before)))
            elif before != after and before is not None and after is not None:
                columns = tuple(c for c in {**before, **after} if before.get(c) != after.get(c))
                changes.append(
                    RowChange(
                        table,
                        _key_text(table, after),
                        "changed",
                        before=mask_row(table, before),
                        after=mask_row(table, after),
                        columns=columns,
                    )
                )
    return changes


def unified_diff(old_doc: DocumentIn, new_doc: DocumentIn, old_label: str, new_label: str) -> str:
    """A unified diff of two documents, one line per column under a header per row, secrets masked."""
    diff = difflib.unified_diff(_lines(old_doc), _lines(new_doc), old_label, new_label, lineterm="")
    return "\n".join(diff)


def _lines(document: DocumentIn) -> list[str]:
    """A document as text for diffing: rows in key order, columns in the table's order, values as JSON."""
    lines = []
    for table in TABLE_MODELS:
        order = list(table_columns(table))
        rows = sorted(document.get(table, []), key=lambda row, t=table: _sort_key(_row_key(t, row)))
        for row in rows:
            shown = mask_row(table, row)
            lines.append(f"{table} ({_key_text(table, row)})")
            columns = [c for c in order if c in shown] + sorted(c for c in shown if c not in order)
            lines.extend(f"    {c} = {json.dumps(shown[c], ensure_ascii=False)}" for c in columns)
    return lines

"""Roles: viewer (read), operator (edit drafts, publish, roll back), admin (also manages accounts).

A role is a Django group of that name; a superuser has every role. Roles are cumulative: an operator is also a
viewer, an admin also an operator.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)


def role_of(user: AbstractBaseUser | AnonymousUser) -> str | None:
    """The user's highest role, or None for an anonymous or role-less user."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
    return next((role for role in reversed(ROLES) if role in names), None)


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    """Whether the user holds ``role`` or a higher one."""
    held = role_of(user)
    return held is not None and ROLES.index(held) >= ROLES.index(role)


def can_view(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May read tables, versions, nodes and stats."""
    return has_role(user, VIEWER)


def can_edit(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May edit the draft, publish and roll back."""
    return has_role(user, OPERATOR)


def can_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May manage accounts and roles."""
    return has_role(user, ADMIN)


def ensure_role_groups() -> None:
    """Create the role groups if missing."""
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def grant(user: AbstractBaseUser, role: str) -> None:
    """Give ``user`` exactly ``role`` (removing the other role groups)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    ensure_role_groups()
    groups = user.groups  # type: ignore[attr-defined]
    groups.remove(*Group.objects.filter(name__in=ROLES))
    groups.add(Group.objects.get(name=role))

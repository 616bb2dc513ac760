"""Who may call what: viewers read, operators change the config, admins manage accounts (``fleet.core.roles``)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from fleet.core.roles import can_admin, can_edit, can_view


class RolePermission(BasePermission):
    """Reading needs the viewer role, anything else the operator role; anonymous callers get 401."""

    message = "you have no role on this control plane"

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        self.message = "only operators may change the configuration"
        return can_edit(request.user)


class AdminPermission(BasePermission):
    """Every method needs the admin role."""

    message = "only admins may manage accounts"

    def has_permission(self, request: Request, view: Any) -> bool:
        return can_admin(request.user)


class ViewerPermission(BasePermission):
    """Every method needs the viewer role: a POST that changes nothing (the rule tester)."""

    message = "you have no role on this control plane"

    def has_permission(self, request: Request, view: Any) -> bool:
        return can_view(request.user)

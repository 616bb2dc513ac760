"""API tokens that expire: one per account, valid for ``FLEET_TOKEN_DAYS`` (30) days from when it was made, renewed
by logging in to the token endpoint again, revoked from the UI (``/account/token/``) or by an admin."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def lifetime() -> timedelta:
    """How long a token is valid."""
    return timedelta(days=float(getattr(settings, "FLEET_TOKEN_DAYS", 30)))


def expires_at(token: Token) -> datetime:
    """When ``token`` stops working."""
    return token.created + lifetime()


def fresh_token(user: AbstractBaseUser, now: datetime | None = None) -> Token:
    """``user``'s token: the one it has while valid, else a new one (an expired token is replaced)."""
    now = now or timezone.now()
    token = Token.objects.filter(user=user).first()
    if token is not None and expires_at(token) > now:
        return token
    if token is not None:
        token.delete()
    return Token.objects.create(user=user)


def new_token(user: AbstractBaseUser) -> Token:
    """A new token for ``user``, the old one (if any) revoked."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def revoke(user: AbstractBaseUser) -> bool:
    """Revoke ``user``'s token; whether there was one."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing a token past its lifetime."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user, token = super().authenticate_credentials(key)
        if expires_at(token) <= timezone.now():
            raise AuthenticationFailed("token expired: ask POST /api/v1/auth/token/ for a new one")
        return user, token

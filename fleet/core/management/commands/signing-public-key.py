"""``python manage.py signing-public-key``: the public half of the control plane's config signing key
(``fleet.core.signing``; the key file is made if there is none yet), to give every node as
``--signing-public-key`` or ``$PROXYFLEET_SIGNING_PUBLIC_KEY``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from fleet.core import signing


class Command(BaseCommand):
    """Print the signing key's public half."""

    help = "Print the public key nodes check configs with (--signing-public-key)."

    def handle(self, *args: Any, **options: Any) -> None:
        """Print the key, alone on its line."""
        try:
            self.stdout.write(signing.public_key_text())
        except signing.SigningKeyError as exc:
            raise CommandError(str(exc)) from exc

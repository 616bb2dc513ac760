"""A management command whose positionals may stand on both sides of its options."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class IntermixedCommand(BaseCommand):
    """Parses ``ACTION --option X FILE`` as written (plain argparse takes a positional after the options for an
    unrecognized argument when an earlier positional is optional)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        """The command's parser, reading positionals mixed with options."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.parse_args = parser.parse_intermixed_args  # type: ignore[method-assign]
        return parser

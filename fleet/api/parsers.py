"""The API's JSON bodies read as the proxy reads a config (``proxyapp.config.jsontext``): one strict parser for
the control plane and the nodes, so a document both see is accepted or refused alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from proxyapp.config.jsontext import read_json


class StrictJSONParser(JSONParser):
    """A JSON body; 400 for one that names a key twice in an object or nests too deeply to decode, as for bad JSON."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            return read_json(stream.read())
        except ValueError as error:  # bad JSON, a key twice, too deep, bytes that are not text
            raise ParseError(f"JSON parse error - {error}") from None

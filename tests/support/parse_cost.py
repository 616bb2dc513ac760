"""Every parser a query meets on its way through the proxy (MySQL's, and PostgreSQL's tokens and digests), fed
adversarial text of a given size: run under valgrind (``tests/unit/proxyapp/sql/test_linear_parsers.py``) so that
the work is counted in instructions, which the machine's load does not change, not timed.

``python -m tests.support.parse_cost SIZE [NAME]`` parses every input (or the one named) of SIZE characters with
every parser; SIZE 0 measures the start-up alone.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from functools import partial

from proxyapp.rules.engine import parse_annotations
from proxyapp.session.kill import KillRefused, parse_kill
from proxyapp.sql.digest import digest_text
from proxyapp.sql.lex import PGSQL, first_block_comment, split_statements, tokenize
from proxyapp.sql.scan import scan

#: Adversarial inputs by name: each a function of the size, built from what makes a scanner or a regex backtrack
#: (unterminated comments, quotes and escapes, comment openers, deep nesting, long lists, lookalike keywords).
INPUTS: dict[str, Callable[[int], str]] = {
    "unterminated comment": lambda n: "/*" + "a" * n,
    "comment openers": lambda n: "/*" * (n // 2),
    "comment of stars": lambda n: "/*" + "*" * n,
    "closed comments": lambda n: "/**/" * (n // 4) + "SELECT 1",
    "annotation pairs": lambda n: "/*" + "k=v;" * (n // 4) + "*/ SELECT 1",
    "annotation equals": lambda n: "/*" + "=" * n + "*/ SELECT 1",
    "unterminated quote": lambda n: "SELECT '" + "a" * n,
    "escapes in a quote": lambda n: "SELECT '" + "\\'" * (n // 2),
    "backticks": lambda n: "SELECT `" + "``" * (n // 2),
    "double quotes": lambda n: 'SELECT "' + '""' * (n // 2),
    "line comments": lambda n: "-- x\n# y\n" * (n // 9) + "SELECT 1",
    "parentheses": lambda n: "SELECT " + "(" * n,
    "in list": lambda n: "SELECT * FROM t WHERE a IN (" + "1," * (n // 2) + "1)",
    "values rows": lambda n: "INSERT INTO t VALUES " + "(1,2)," * (n // 6) + "(1,2)",
    "values cut": lambda n: "INSERT INTO t VALUES (1,2), (" + "1," * (n // 2),
    "numbers": lambda n: "SELECT " + "1" * n,
    "identifiers": lambda n: "SELECT " + "a" * n,
    "semicolons": lambda n: ";" * n,
    "begin blocks": lambda n: "BEGIN NOT ATOMIC " + "IF 1 THEN " * (n // 10),
    "kill with comments": lambda n: "/* x */ " * (n // 8) + "KILL 1",
    "kill spaces": lambda n: "KILL" + " " * n,
    "trailing spaces": lambda n: "SELECT 1" + " " * n,
    "leading spaces": lambda n: " " * n + "SELECT 1",
    "only whitespace": lambda n: " \t\n" * (n // 3),
    "at signs": lambda n: "SELECT " + "@" * n,
    "system variables": lambda n: "SELECT " + "@@a." * (n // 4),
    "hosts": lambda n: "GRANT ALL ON *.* TO a" + "@a" * (n // 2),
    "hex and bits": lambda n: "SELECT 0x" + "f" * n + " , x'" + "0" * n,
    "exponents": lambda n: "SELECT " + "1e" * (n // 2),
    "dashes": lambda n: "SELECT " + "-" * n,
    "executable comments": lambda n: "/*!50000 " * (n // 9) + "SELECT 1",
    "comment closers": lambda n: "SELECT " + "*/" * (n // 2),
    "introducers": lambda n: "SELECT _" + "a" * n + "'x",
    "dollar quotes": lambda n: "$$" * (n // 2),
    "unterminated dollar quote": lambda n: "SELECT $tag$" + "$tag " * (n // 5),
    "unterminated escape string": lambda n: "SELECT E'" + "\\'" * (n // 2),
    "nested comments": lambda n: "/* " * (n // 6) + "*/ " * (n // 6) + "SELECT 1",
    "parameters in a list": lambda n: "SELECT * FROM t WHERE a IN (" + "$1," * (n // 3) + "$1)",
    "casts": lambda n: "SELECT 1" + "::int" * (n // 5),
}

PARSERS: tuple[Callable[[str], object], ...] = (
    tokenize,
    scan,
    digest_text,
    split_statements,
    first_block_comment,
    parse_annotations,
    partial(tokenize, dialect=PGSQL),
    partial(digest_text, dialect=PGSQL),
)


def parse_all(text: str) -> None:
    """Run every parser over ``text`` (what they answer does not matter here, only that they finish)."""
    for parser in PARSERS:
        parser(text)
    with contextlib.suppress(KillRefused):
        parse_kill(text)


def main(argv: list[str]) -> int:
    size = int(argv[0])
    names = argv[1:] or list(INPUTS)
    for name in names:
        text = INPUTS[name](size) if size else ""
        os.getppid()  # the marker valgrind cuts its counts at (``--dump-before=getppid``): one part per input
        parse_all(text)
    os.getppid()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

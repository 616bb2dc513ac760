"""The house's layers, read from the code's own imports: the proxy never imports Django, the control plane or the
development tooling; the control plane never imports the development tooling; no two packages of the proxy import
each other, directly or in a loop (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def imports(package: str) -> Iterator[tuple[Path, str]]:
    """Every module a file of ``package`` imports at any depth of its code: (file, dotted module name)."""
    for path in sorted((REPO / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                yield from ((path, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                yield path, node.module


def offending(package: str, forbidden: tuple[str, ...]) -> list[str]:
    """The imports of ``package`` of a module under one of ``forbidden`` (top-level names)."""
    return [f"{path.relative_to(REPO)}: {name}" for path, name in imports(package) if name.split(".")[0] in forbidden]


def test_the_proxy_imports_neither_django_nor_the_control_plane_nor_the_tooling() -> None:
    assert offending("proxyapp", ("django", "rest_framework", "fleet", "devstack", "tests")) == []


def test_the_control_plane_never_imports_the_development_tooling() -> None:
    assert offending("fleet", ("devstack", "tests")) == []


def test_no_two_packages_of_the_proxy_import_each_other_even_in_a_loop() -> None:
    edges: dict[str, set[str]] = {}
    for path, name in imports("proxyapp"):
        parts = path.relative_to(REPO / "proxyapp").parts
        if len(parts) < 2 or not name.startswith("proxyapp."):
            continue  # a module at the top of proxyapp/ is a room of its own, not a package
        target = name.split(".")[1]
        if target != parts[0] and (REPO / "proxyapp" / target).is_dir():
            edges.setdefault(parts[0], set()).add(target)
    loops = []

    def visit(package: str, path: list[str]) -> None:
        for target in sorted(edges.get(package, ())):
            if target in path:
                loops.append(" -> ".join([*path[path.index(target) :], target]))
            elif len(path) < len(edges) + 1:
                visit(target, [*path, target])

    for package in sorted(edges):
        visit(package, [package])
    assert loops == []

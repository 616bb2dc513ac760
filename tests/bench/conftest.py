"""The benchmark tests share the control-plane tests' accounts (one per role)."""

from tests.control.conftest import accounts  # noqa: F401  (a fixture, used by name)

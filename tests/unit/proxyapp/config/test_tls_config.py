"""The TLS variables in a config document: their paths, their pairs, and users who could never log in."""

from __future__ import annotations

import pytest

from proxyapp.config.document import ConfigError, parse_config
from proxyapp.config.variables import VARIABLES

SERVER = {"hostgroup_id": 10, "hostname": "db1", "port": 3306, "use_ssl": 1}
USER = {"username": "app", "password": "secret", "default_hostgroup": 10}


def document(users: list[dict[str, object]] | None = None, **variables: str) -> dict[str, object]:
    """A document with one TLS server, ``users`` (one app user by default) and ``variables``."""
    return {
        "mysql_servers": [SERVER],
        "mysql_users": users if users is not None else [USER],
        "global_variables": [{"variable_name": k, "variable_value": v} for k, v in variables.items()],
    }


def errors_of(doc: dict[str, object]) -> list[str]:
    """The errors of a document that must be refused."""
    with pytest.raises(ConfigError) as refused:
        parse_config(doc)
    return refused.value.errors


def test_tls_is_offered_by_default_and_backends_are_not_verified_unless_asked() -> None:
    config = parse_config(document())
    assert config.variables.flag("mysql-have_ssl") is True
    assert config.variables.flag("mysql-ssl_p2s_verify") is False
    assert config.mysql_servers[0].use_ssl is True
    assert all(VARIABLES[name].help for name in VARIABLES if "ssl" in name)


@pytest.mark.parametrize(
    "name", ["mysql-ssl_cert", "mysql-ssl_key", "mysql-ssl_ca", "mysql-ssl_p2s_ca", "mysql-ssl_p2s_cert"]
)
def test_a_relative_certificate_path_is_refused_naming_the_variable(name: str) -> None:
    [error] = errors_of(document(**{name: "certs/x.pem"}))
    assert error == (
        f"global_variables[0] (variable_name={name!r}): variable_value: "
        "'certs/x.pem' is not an absolute path (write the file's full path, or '' for none)"
    )


def test_a_certificate_without_its_key_is_refused() -> None:
    assert errors_of(document(**{"mysql-ssl_cert": "/etc/proxyfleet/cert.pem"})) == [
        "global_variables[0] mysql-ssl_cert: set without mysql-ssl_key; set both (PEM files) or neither"
    ]
    assert errors_of(document(**{"mysql-ssl_p2s_key": "/etc/proxyfleet/p2s-key.pem"})) == [
        "global_variables[0] mysql-ssl_p2s_key: set without mysql-ssl_p2s_cert; set both (PEM files) or neither"
    ]


def test_both_files_and_absolute_paths_are_accepted() -> None:
    config = parse_config(document(**{"mysql-ssl_cert": "/etc/pf/cert.pem", "mysql-ssl_key": "/etc/pf/key.pem"}))
    assert config.variables.text("mysql-ssl_cert") == "/etc/pf/cert.pem"
    assert config.warnings == ()


def test_a_use_ssl_user_without_tls_offered_is_warned_about() -> None:
    config = parse_config(document([{**USER, "use_ssl": 1}], **{"mysql-have_ssl": "false"}))
    assert config.warnings == (
        "mysql_users[0] username='app' has use_ssl=1 and mysql-have_ssl is false: it can never log in",
    )
    assert parse_config(document([{**USER, "use_ssl": 1}])).warnings == ()

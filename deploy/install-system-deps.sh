#!/usr/bin/env bash
# Installs the Debian packages ProxyFleet needs, when missing: apt-get as root, otherwise it names them and fails.
# Idempotent and quick (no apt-get at all) when everything is there.
set -euo pipefail

declare -A need=(
  [mariadbd]=mariadb-server
  [mariadb-install-db]=mariadb-server
  [mariadb]=mariadb-client
  [sysbench]=sysbench
  [haproxy]=haproxy
  [redis-server]=redis-server
  [chromium]=chromium
  # Counts instructions for the linear-parser test (tests/live/proxyapp/sql/test_linear_parsers.py).
  [valgrind]=valgrind
  # mysqlclient and MariaDB Connector/Python (the tests' libmariadb drivers) build against these.
  [mariadb_config]=libmariadb-dev
  [pkg-config]=pkg-config
  # PostgreSQL's clients (psql, and pgbench's wrapper; pgbench itself comes with the server package) and PgBouncer
  # for the PostgreSQL sandbox (devstack/pgsandbox.py) and make bench-pgsql; the server is checked for below.
  [psql]=postgresql-client
  [pgbench]=postgresql-client
  [pgbouncer]=pgbouncer
)
missing=()
for cmd in "${!need[@]}"; do
  # mariadbd, haproxy and pgbouncer live in /usr/sbin, which is not on every user's PATH.
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${need[$cmd]}")
  fi
done
# The server's binaries (initdb, postgres, pg_basebackup, pgbench) are under /usr/lib/postgresql/VERSION/bin.
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || ! compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null; then
  missing+=(postgresql)
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ProxyFleet needs these Debian packages: ${missing[*]}" >&2
  echo "Install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

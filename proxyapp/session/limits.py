"""Which sessions have outstayed a limit: a pure function of a session's times and the settings, given the time.

The proxy's housekeeping asks it once a second for every session with the proxy's clock (``proxyapp.clock``); tests
ask it with any clock they like (``tests/unit/proxyapp/session/test_limits.py``) or move the proxy's, so no test
waits for a limit to pass.
"""

from __future__ import annotations

from proxyapp.rules.runtime import SessionSettings

#: Nothing to do.
STAY = 0
#: Kill the session: its running statement, its connection, its transaction (rolled back).
KILL = 1
#: Close the client connection, as a server does past ``wait_timeout``.
DISCONNECT = 2
#: Drop the backend connection still running the statement of a client gone: the backend ignored the KILL.
ABANDON = 3
#: Close the client connection idle past its wait_timeout, as the server would (``Session.time_out``).
TIME_OUT = 4
#: How long a backend may take to end the statement of a client gone (KILLed) before its connection is dropped.
ABANDON_AFTER_S = 5.0


def overstay(
    in_transaction: bool,
    transaction_since: float,
    idle_since: float,
    stalled_since: float,
    now: float,
    settings: SessionSettings,
    login_since: float = 0.0,
    gone_since: float = 0.0,
    wait_timeout_s: float = 0.0,
) -> tuple[int, str]:
    """What to do with a session at time ``now`` (its times on the same clock; ``idle_since`` 0 while a command
    runs; ``stalled_since`` 0 unless the client left a packet half sent, else since when no byte of it came;
    ``login_since`` since when it has been logging in, 0 once it has; ``gone_since`` since when its client is gone
    with its statement still running, 0 if not; ``wait_timeout_s`` the session's own wait_timeout, 0 if it set
    none), and why."""
    if login_since and now - login_since > settings.connect_timeout_client_ms / 1000:
        return DISCONNECT, "did not log in within mysql-connect_timeout_client"
    if gone_since and now - gone_since > ABANDON_AFTER_S:
        return ABANDON, "the backend did not end the statement of a client gone"
    if stalled_since and now - stalled_since > settings.net_read_timeout_ms / 1000:
        return DISCONNECT, "a packet half sent for over mysql-net_read_timeout"
    idle = now - idle_since if idle_since else 0.0
    if in_transaction:
        longest = settings.max_transaction_time_ms / 1000
        if now - transaction_since > longest:
            return KILL, f"its transaction ran for over mysql-max_transaction_time ({longest:g} s)"
        longest_idle = settings.max_transaction_idle_time_ms / 1000
        if idle > longest_idle:
            return KILL, f"idle in a transaction for over mysql-max_transaction_idle_time ({longest_idle:g} s)"
    if wait_timeout_s and wait_timeout_s < settings.wait_timeout_ms / 1000:
        if idle > wait_timeout_s:
            return TIME_OUT, f"idle for over its wait_timeout ({wait_timeout_s:g} s)"
    elif idle > settings.wait_timeout_ms / 1000:
        return TIME_OUT, "idle for over mysql-wait_timeout"
    return STAY, ""


def tells_inactivity(server_version: str | None) -> bool:
    """Whether a server of ``server_version`` tells a client idle past its wait_timeout why it disconnects it
    (ER_CLIENT_INTERACTION_TIMEOUT: MySQL since 8.0.24, MariaDB since 11), where older ones close in silence."""
    if not server_version:
        return False
    mariadb = "mariadb" in server_version.lower()
    if mariadb and server_version.startswith("5.5.5-"):  # the prefix MariaDB 10 and 11 show old replicas
        server_version = server_version[6:]
    numbers = server_version.split("-", 1)[0].split(".")
    try:
        major, minor, patch = (int(n) for n in [*numbers, "0", "0"][:3])
    except ValueError:
        return False
    if mariadb:
        return major >= 11
    return (major, minor, patch) >= (8, 0, 24)

"""Forwarding listeners (``pgsql_forward_listeners``): ports that pass whole TCP connections to PostgreSQL servers.

oneproxy-monitor's feature, the cheapest way through the proxy: each active row is a port on the node, bound by every
worker process (``SO_REUSEPORT``: the kernel spreads clients over them); a client's connection goes whole to one
server of the row's ``pgsql_servers`` hostgroup, picked by weight among those ONLINE with room, and then bytes pass
untouched (``relay``). The servers' runtime status is the config's under the monitor's findings
(``topology.pgsql_runtime``): SHUNNED and OFFLINE_SOFT servers get no new connections (an OFFLINE_SOFT one drains),
an OFFLINE_HARD or removed one has its connections closed. A server that refuses a connect is counted and the next
one by weight is tried, up to ``pgsql-connect_retries_on_failure`` more. Once connected, the bytes pass through the C
relay (``splicing``) when it is built, else through the Python one (``relay``); ``connections_spliced`` counts the
former.

A listener whose port cannot be bound (taken by another program) is reported with the reason and retried every
housekeeping second. ``max_connections`` of a listener and of a server are the node's: each worker process takes its
share.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
from collections.abc import Callable
from typing import Any

from proxyapp.backends.choice import no_server, weighted_order
from proxyapp.backends.pool import OFFLINE_HARD, ONLINE
from proxyapp.backends.topology import MonitorState, pgsql_runtime, show_address
from proxyapp.config.document import Config
from proxyapp.config.tables import PgsqlForwardListener, PgsqlServer
from proxyapp.forward.relay import CancelSender, ClientSide, ListenerCounters, Refused, ServerCounters, ServerSide
from proxyapp.forward.splicing import RELAY, SPLICER, connect_socket
from proxyapp.pgsql.backend import deliver_cancel
from proxyapp.pgsql.messages import CANCEL_REQUEST_LENGTH, CONNECTION_FAILURE, TOO_MANY_CONNECTIONS

log = logging.getLogger("proxyapp.forward")

#: The state of a listener that is bound.
LISTENING = "listening"


class Target:
    """A ``pgsql_servers`` row as a forwarding target in this process: its runtime status and its figures."""

    __slots__ = ("clients", "counters", "reason", "server")

    def __init__(self, server: PgsqlServer, reason: str) -> None:
        self.server = server
        self.reason = reason
        self.counters = ServerCounters()
        self.clients: set[ClientSide] = set()  # the clients forwarded to it now

    def row(self) -> dict[str, Any]:
        """Its row of the ``pgsql_forward`` report's ``servers``."""
        s, c = self.server, self.counters
        return {
            "hostgroup_id": s.hostgroup_id,
            "hostname": s.hostname,
            "port": s.port,
            "status": s.status,
            "status_reason": self.reason,
            "connections_active": c.active,
            "connections_total": c.total,
            "connect_errors": c.connect_errors,
            "bytes_sent": c.bytes_sent,
            "bytes_recv": c.bytes_recv,
        }


class Listener:
    """One forwarding port in this process: its row, its server (once bound) and its figures."""

    __slots__ = ("clients", "counters", "row", "server", "state")

    def __init__(self, row: PgsqlForwardListener) -> None:
        self.row = row
        self.server: asyncio.AbstractServer | None = None
        self.state = "not bound yet"
        self.counters = ListenerCounters()
        self.clients: set[ClientSide] = set()

    def report(self) -> dict[str, Any]:
        """Its row of the ``pgsql_forward`` report's ``listeners``."""
        r, c = self.row, self.counters
        return {
            "port": r.port,
            "interface": r.interface,
            "hostgroup_id": r.hostgroup_id,
            "state": self.state,
            "connections_active": c.active,
            "connections_total": c.total,
            "connections_refused": c.refused,
            "connections_spliced": c.spliced,
            "bytes_from_clients": c.bytes_from_clients,
            "bytes_to_clients": c.bytes_to_clients,
        }


def pick_order(targets: list[Target], has_room: Callable[[Target], bool], rng: random.Random) -> list[Target]:
    """The ONLINE targets with room and a weight, in the order to try them (``weighted_order``)."""
    usable = [t for t in targets if t.server.status == ONLINE and has_room(t)]
    return weighted_order(usable, lambda t: t.server.weight, rng)


class Forwarding:
    """Every forwarding listener of this process and the servers they forward to."""

    def __init__(self, workers: int = 1, rng: random.Random | None = None) -> None:
        self.workers = workers
        self.rng = rng or random.Random()
        self.listeners: dict[int, Listener] = {}  # by port
        self.targets: dict[tuple[int, str, int], Target] = {}  # by pgsql_servers key
        self.connect_timeout_s = 1.0
        self.client_timeout_s = 10.0
        self.retries = 10
        self._wanted: dict[int, PgsqlForwardListener] = {}  # the active rows of the config, by port
        self._bind_lock = asyncio.Lock()

    def share(self, limit: int) -> int:
        """This process's share of a node-wide connection limit."""
        return max(1, math.ceil(limit / self.workers))

    # ------------------------------------------------------------------------------------------- config

    def apply(self, config: Config, state: MonitorState) -> None:
        """Follow a config and the monitor's findings: the servers' runtime rows now, the listeners at ``bind``."""
        v = config.variables
        self.connect_timeout_s = v.integer("pgsql-connect_timeout_server") / 1000
        self.client_timeout_s = v.integer("pgsql-connect_timeout_client") / 1000
        self.retries = v.integer("pgsql-connect_retries_on_failure")
        runtime = {server.key: (server, reason) for server, reason in pgsql_runtime(config, state)}
        for key in list(self.targets):
            if key not in runtime:
                gone = self.targets.pop(key)
                self._close_clients(gone, "removed from pgsql_servers")
        for key, (server, reason) in runtime.items():
            target = self.targets.get(key)
            if target is None:
                self.targets[key] = Target(server, reason)
                continue
            old = target.server.status
            target.server, target.reason = server, reason
            if server.status != old:
                log.info(
                    "forwarding: pgsql server %s in hostgroup %d: %s -> %s (%s)",
                    show_address(server.address),
                    server.hostgroup_id,
                    old,
                    server.status,
                    reason,
                )
            if server.status == OFFLINE_HARD:
                self._close_clients(target, "OFFLINE_HARD")
        wanted = {row.port: row for row in config.pgsql_forward_listeners if row.active}
        for port, listener in self.listeners.items():
            if port in wanted:
                listener.row = wanted[port]
        self._wanted = wanted

    def _close_clients(self, target: Target, why: str) -> None:
        if target.clients:
            log.warning(
                "forwarding: closing %d connections to %s: %s",
                len(target.clients),
                show_address(target.server.address),
                why,
            )
        for client in list(target.clients):
            client.close()

    async def bind(self) -> None:
        """Open the listeners the config wants and are not open (or failed before); close those it no longer
        wants (their connections go on until they end)."""
        async with self._bind_lock:
            wanted = self._wanted
            for port in list(self.listeners):
                listener = self.listeners[port]
                row = wanted.get(port)
                if row is None or row.interface != listener.row.interface:
                    self._unbind(self.listeners.pop(port))
            loop = asyncio.get_running_loop()
            for port, row in wanted.items():
                listener = self.listeners.setdefault(port, Listener(row))
                if listener.server is not None:
                    continue
                try:
                    listener.server = await loop.create_server(
                        lambda listener=listener: self._client(listener),  # type: ignore[misc]
                        row.interface,
                        port,
                        reuse_port=True,
                        backlog=4096,
                        family=socket.AF_INET6 if ":" in row.interface else socket.AF_INET,
                    )
                except OSError as exc:
                    state = f"error: cannot listen on {show_address((row.interface, port))}: {exc.strerror or exc}"
                    if listener.state != state:
                        log.error("forwarding: %s", state.removeprefix("error: "))
                    listener.state = state
                    continue
                listener.state = LISTENING
                log.info(
                    "forwarding %s to pgsql hostgroup %d through %s",
                    show_address((row.interface, port)),
                    row.hostgroup_id,
                    RELAY,
                )

    def _unbind(self, listener: Listener) -> None:
        if listener.server is not None:
            listener.server.close()
            listener.server = None
        log.info("forwarding: stopped listening on port %d", listener.row.port)

    def needs_bind(self) -> bool:
        """Whether a wanted listener is not bound (a port that was taken: the housekeeping retries)."""
        return any(port not in self.listeners or self.listeners[port].server is None for port in self._wanted) or any(
            port not in self._wanted for port in self.listeners
        )

    async def stop(self) -> None:
        """Close every listener and every forwarded connection."""
        async with self._bind_lock:
            for listener in self.listeners.values():
                self._unbind(listener)
                for client in list(listener.clients):
                    client.close()
            self.listeners.clear()

    # ------------------------------------------------------------------------------------------- clients

    def _client(self, listener: Listener) -> ClientSide:
        """A protocol for a new client of ``listener``: refused at its first message when the listener is full."""
        refusal = None
        limit = self.share(listener.row.max_connections)
        if listener.counters.active >= limit:
            refusal = (
                TOO_MANY_CONNECTIONS,
                f"ProxyFleet: port {listener.row.port} has max_connections={listener.row.max_connections} clients "
                f"({limit} per worker process)",
            )
        client = ClientSide(listener.counters, lambda c: self._open(listener, c), self._cancel(listener), refusal)
        listener.clients.add(client)
        client.on_end.append(lambda: listener.clients.discard(client))
        client.start_timer(self.client_timeout_s)
        return client

    async def _open(self, listener: Listener, client: ClientSide) -> ServerSide:
        """Connect ``client`` to a server of its listener's hostgroup, by weight; ``Refused`` when none answers."""
        hostgroup = listener.row.hostgroup_id
        targets = [t for t in self.targets.values() if t.server.hostgroup_id == hostgroup]
        order = pick_order(targets, lambda t: t.counters.active < self.share(t.server.max_connections), self.rng)
        if not order:
            raise Refused(CONNECTION_FAILURE, no_server(hostgroup, [t.server for t in targets]))
        loop = asyncio.get_running_loop()
        errors = []
        for target in order[: self.retries + 1]:
            host, port = target.server.address
            try:
                if SPLICER is not None:
                    sock = await asyncio.wait_for(connect_socket(host, port), self.connect_timeout_s)
                    server = ServerSide(client, sock)
                else:
                    _, server = await asyncio.wait_for(
                        loop.create_connection(lambda: ServerSide(client), host, port), self.connect_timeout_s
                    )
            except (OSError, TimeoutError) as exc:
                target.counters.connect_errors += 1
                why = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
                errors.append(f"{show_address(target.server.address)}: {why}")
                continue
            server.counters = target.counters
            target.counters.active += 1
            target.counters.total += 1
            target.clients.add(client)
            client.on_end.append(lambda clients=target.clients: clients.discard(client))  # type: ignore[misc]
            return server
        raise Refused(
            CONNECTION_FAILURE, f"ProxyFleet: no server of pgsql hostgroup {hostgroup} answered: {'; '.join(errors)}"
        )

    def _cancel(self, listener: Listener) -> CancelSender:
        async def send(request: bytes) -> None:
            """A CancelRequest to every server of the hostgroup that may run sessions (only the one running the
            session it names acts on it), done when each has acted on it or could not be reached."""
            hostgroup = listener.row.hostgroup_id
            addresses = [
                target.server.address
                for target in self.targets.values()
                if target.server.hostgroup_id == hostgroup and target.server.status != OFFLINE_HARD
            ]
            packet = request[:CANCEL_REQUEST_LENGTH]
            timeout_s = self.connect_timeout_s
            await asyncio.gather(*(deliver_cancel(host, port, packet, timeout_s) for host, port in addresses))

        return send

    # ------------------------------------------------------------------------------------------- report

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The ``pgsql_forward`` section of the report."""
        if SPLICER is not None:
            SPLICER.sync()
        return {
            "listeners": [self.listeners[port].report() for port in sorted(self.listeners)],
            "servers": [self.targets[key].row() for key in sorted(self.targets)],
        }

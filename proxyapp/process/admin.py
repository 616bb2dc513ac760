"""The loopback HTTP admin endpoint: JSON stats, Prometheus ``/metrics``, ``/config`` and ``/reload``.

It runs inside the proxy's event loop and reads everything from an ``AdminProvider`` (the proxy), so it never
imports the session or pool modules. Who may drive it (``proxyapp.credential``): every POST needs the admin
credential (``Authorization: Bearer TOKEN``, else 401); ``GET /config`` shows the secrets (passwords) only with it;
the other GETs (health, stats, metrics, monitor logs, the processlist, which shows no literals) are open to the
host's users, as a scraper needs. A request from a browser (an ``Origin`` header) or naming a host that is not
loopback (``Host``: DNS rebinding) is refused with 403 whatever it shows. Endpoints (JSON unless noted; every error
is ``{"error": "..."}``):

=====  ============================  ============================================================================
GET    /health                       ``{"status": "ok"}``
GET    /stats                        the provider's whole snapshot
GET    /stats/global                 stats_mysql_global
GET    /stats/connection_pool        stats_mysql_connection_pool rows
GET    /stats/query_digest           stats_mysql_query_digest rows; ``?limit=N&order_by=sum_time|count_star|...``
POST   /stats/query_digest/reset     the digest rows, then empties the table (stats_mysql_query_digest_reset)
GET    /stats/query_rules            stats_mysql_query_rules rows (rule_id, hits)
GET    /config                       the running config document with its checksum, source and load time (its
                                     passwords masked unless the request shows the admin credential)
POST   /reload                       load the JSON body as the new config (no body: re-read the config file);
                                     400 for a body that is not a JSON object, 422 when the config is refused
GET    /metrics                      Prometheus text exposition format 0.0.4
GET    /monitor/{check}              a monitor check's log, ProxySQL's monitor.mysql_server_{check}_log columns
                                     (connect, ping, read_only, replication_lag); ``?limit=N``: the last N rows
GET    /monitor/transitions          the latest server status transitions (``server_transitions`` of /stats)
GET    /runtime/servers              the runtime mysql_servers the proxy routes by (runtime_mysql_servers)
GET    /processlist                  the client sessions (stats_mysql_processlist): what each runs (its digest text,
                                     without literals), where, since when
POST   /processlist/{id}/kill        end session ``id`` (ProxySQL's KILL CONNECTION); body ``{"query_only": true}``:
                                     only interrupt its running statement (KILL QUERY); 404 for an unknown id
POST   /pgsql/cancel                 (internal) a worker hands another a PostgreSQL CancelRequest for one of its
                                     sessions, body ``{"pid": N, "key": N}``
POST   /runtime/monitor              (internal) the supervisor hands a worker its monitor's state
POST   /runtime/workers              (internal) the supervisor hands a worker every worker's admin port
POST   /clock                        (tests only: a proxy started with PROXYFLEET_TEST_CLOCK=1) move the proxy's
                                     clock forward, body ``{"advance_s": N}`` (``proxyapp.clock``)
=====  ============================  ============================================================================

Why one file of this size: one handler per endpoint in the table above, each short, sharing the request checks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from proxyapp import credential
from proxyapp.backends.monitor import CHECKS
from proxyapp.config.jsontext import read_json
from proxyapp.config.secrets import mask_document
from proxyapp.mysql.constants import ErrorCode
from proxyapp.report.stats import COUNTERS, order_digest_rows
from proxyapp.shown import shown

log = logging.getLogger("proxyapp.process.admin")

#: The largest request body accepted (a config document for /reload).
MAX_BODY_BYTES = 64 << 20
#: How many (digest, hostgroup, username, schemaname) series /metrics exports, busiest first.
METRICS_TOP_DIGESTS = 100
#: Digest texts longer than this are cut in the ``proxyfleet_query_digest_info`` label.
METRICS_DIGEST_TEXT_MAX = 256
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class ReloadResult:
    """What a reload did: the checksum of the config running afterwards, and the errors that refused the new one
    (the running one stays) or the warnings it was loaded with."""

    checksum: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the new config was loaded."""
        return not self.errors

    @classmethod
    def loaded(cls, checksum: str, warnings: Iterable[str] = ()) -> ReloadResult:
        """The new config (``checksum``) runs."""
        return cls(checksum, (), tuple(warnings))

    @classmethod
    def refused(cls, running: str, errors: Iterable[str]) -> ReloadResult:
        """The new config was refused for ``errors``; the one running (``running``, its checksum) stays."""
        return cls(running, tuple(errors) or ("the config was refused",))

    def document(self) -> dict[str, Any]:
        """As the admin endpoint answers it: ``{"ok", "checksum", "errors", "warnings"}``."""
        return {"ok": self.ok, "checksum": self.checksum, "errors": list(self.errors), "warnings": list(self.warnings)}


class AdminProvider(Protocol):
    """What the admin endpoint reads and drives: the running proxy."""

    async def stats_snapshot(self) -> dict[str, Any]:
        """The current statistics.

        Keys: ``global`` (counter name -> int), ``connection_pool`` (stats_mysql_connection_pool rows),
        ``query_digest`` (stats_mysql_query_digest rows), ``query_rules`` (``{"rule_id", "hits"}`` rows) and
        ``config`` (``{"checksum": str, "loaded_at": float, "source": str}``); optionally
        ``query_digest_overflow`` (queries not recorded because the digest table was full), ``sharding_digest``
        (``proxyapp.report.sharding``), ``sharding_tables`` (``proxyapp.sharding.tablerows``), ``server_transitions``,
        ``monitor`` and ``monitor_checks`` (``proxyapp.backends.monitor``); any others are passed through to
        ``GET /stats``.
        """
        ...

    async def monitor_log(self, check: str, limit: int | None) -> list[dict[str, Any]]:
        """A monitor check's log, oldest first; LookupError when this process runs no monitor."""
        ...

    async def runtime_servers(self) -> list[dict[str, Any]]:
        """The runtime mysql_servers rows."""
        ...

    async def apply_monitor_state(self, document: dict[str, Any]) -> dict[str, Any]:
        """Route by the monitor state ``document``; ``{"ok": bool, ...}`` with an ``error`` when refused."""
        ...

    async def monitor_seq(self) -> int:
        """The number of the monitor findings routed by (it grows with every change; 0 before the first)."""
        ...

    async def processlist(self) -> list[dict[str, Any]]:
        """The client sessions, a row each."""
        ...

    async def kill_session(self, target: int, query_only: bool, username: str | None) -> dict[str, Any]:
        """Kill session ``target`` (as ``username``, None: as the admin); ``proxyapp.session.kill.outcome``'s answer."""
        ...

    async def pgsql_cancel(self, pid: int, key: int) -> None:
        """A PostgreSQL CancelRequest for session ``pid`` with secret ``key``, taken by another worker process."""
        ...

    async def pgsql_close_idle(self, database: str) -> int:
        """Close the pooling proxy's idle server connections to ``database`` (about to be dropped); how many."""
        ...

    async def advance_clock(self, seconds: float) -> dict[str, Any]:
        """Move the proxy's clock ``seconds`` forward (ValueError when it cannot move so); ``{"ok": True, ...}``."""
        ...

    async def set_worker_ports(self, ports: list[int]) -> None:
        """Every worker process's admin port, by worker index; LookupError where there are no siblings."""
        ...

    async def config_document(self) -> dict[str, Any]:
        """The running config as a config document."""
        ...

    async def reset_query_digest(self) -> list[dict[str, Any]]:
        """The digest rows, after which the digest table is empty."""
        ...

    async def reload(self, document: dict[str, Any] | None) -> ReloadResult:
        """Load ``document`` as the config (None: re-read the config file)."""
        ...


class AdminServer:
    """The admin HTTP server, bound to a loopback address; ``start()`` and ``stop()`` run in the proxy's loop."""

    def __init__(
        self,
        provider: AdminProvider,
        host: str = "127.0.0.1",
        port: int = 6070,
        token: str = "",
        clock_movable: bool = False,
    ) -> None:
        if not token:
            raise ValueError("the admin endpoint needs an admin token (proxyapp.credential)")
        self.provider = provider
        self.token = token
        self.clock_movable = clock_movable  # serve POST /clock (tests only)
        self.host = _loopback(host)
        #: The port to listen on; after ``start()`` the port actually bound (useful with port 0).
        self.port = port
        self._runner: web.AppRunner | None = None
        self._reload_lock = asyncio.Lock()

    async def start(self) -> None:
        """Listen; port 0 picks a free port, which ``self.port`` then holds."""
        app = web.Application(middlewares=[_json_errors, self._guard], client_max_size=MAX_BODY_BYTES)
        app.add_routes(
            [
                web.get("/health", self._health),
                web.get("/stats", self._stats),
                web.get("/stats/global", self._section("global")),
                web.get("/stats/connection_pool", self._section("connection_pool")),
                web.get("/stats/query_digest", self._query_digest),
                web.post("/stats/query_digest/reset", self._query_digest_reset),
                web.get("/stats/query_rules", self._section("query_rules")),
                web.get("/config", self._config),
                web.post("/reload", self._reload),
                web.get("/metrics", self._metrics),
                web.get("/monitor/transitions", self._section("server_transitions")),
                web.get("/monitor/{check}", self._monitor_log),
                web.get("/runtime/servers", self._runtime_servers),
                web.post("/runtime/monitor", self._apply_monitor_state),
                web.get("/runtime/monitor", self._monitor_seq),
                web.post("/runtime/workers", self._set_worker_ports),
                web.get("/processlist", self._processlist),
                web.post("/processlist/{id}/kill", self._kill),
                web.post("/pgsql/cancel", self._pgsql_cancel),
                web.post("/pgsql/close_idle", self._pgsql_close_idle),
            ]
        )
        if self.clock_movable:
            app.add_routes([web.post("/clock", self._advance_clock)])
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def stop(self) -> None:
        """Stop listening and finish the open requests."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------------------------------------ handlers

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Refuse browsers and foreign Host names; every call but a GET must show the credential."""
        if "Origin" in request.headers:
            return _error(403, "the admin endpoint does not answer browsers (the request has an Origin header)")
        if not _loopback_host(request.host):
            return _error(403, f"the admin endpoint answers requests for a loopback host only, not {request.host!r}")
        if request.method not in ("GET", "HEAD") and not self._shows_token(request):
            return _error(
                401,
                f"{request.method} {request.path} needs the admin credential: Authorization: Bearer <the token in the "
                "proxy's admin token file, by default admin.token beside its config file>",
                {"WWW-Authenticate": f'Bearer realm="{credential.REALM}"'},
            )
        return await handler(request)

    def _shows_token(self, request: web.Request) -> bool:
        return credential.shows(request.headers.get("Authorization"), self.token)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(await self.provider.stats_snapshot())

    def _section(self, key: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            return web.json_response((await self.provider.stats_snapshot())[key])

        return handler

    async def _query_digest(self, request: web.Request) -> web.Response:
        order_by = request.query.get("order_by", "sum_time")
        limit = _limit(request)
        if isinstance(limit, web.Response):
            return limit
        try:
            rows = order_digest_rows((await self.provider.stats_snapshot())["query_digest"], limit, order_by)
        except ValueError as exc:
            return _error(400, str(exc))
        return web.json_response(rows)

    async def _query_digest_reset(self, request: web.Request) -> web.Response:
        return web.json_response(await self.provider.reset_query_digest())

    async def _monitor_log(self, request: web.Request) -> web.Response:
        check = request.match_info["check"]
        if check not in CHECKS:
            return _error(404, f"no monitor log {check!r}: the checks are {', '.join(CHECKS)} (and transitions)")
        limit = _limit(request)
        if isinstance(limit, web.Response):
            return limit
        try:
            return web.json_response(await self.provider.monitor_log(check, limit))
        except LookupError as exc:
            return _error(404, str(exc))

    async def _runtime_servers(self, request: web.Request) -> web.Response:
        return web.json_response(await self.provider.runtime_servers())

    async def _monitor_seq(self, request: web.Request) -> web.Response:
        return web.json_response({"seq": await self.provider.monitor_seq()})

    async def _apply_monitor_state(self, request: web.Request) -> web.Response:
        try:
            document = read_json(await request.read())
        except ValueError as exc:
            return _error(400, f"the body is not valid JSON: {exc}")
        result = await self.provider.apply_monitor_state(document)
        return web.json_response(result, status=200 if result.get("ok") else 422)

    async def _processlist(self, request: web.Request) -> web.Response:
        return web.json_response(await self.provider.processlist())

    async def _kill(self, request: web.Request) -> web.Response:
        raw = request.match_info["id"]
        if not raw.isdigit():
            return _error(400, f"the session id must be a number, not {raw!r}")
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        body = body or {}
        query_only = body.get("query_only", False)
        username = body.get("username")
        if not isinstance(query_only, bool) or not (username is None or isinstance(username, str)):
            return _error(400, "query_only must be true or false, username a string or null")
        answer = await self.provider.kill_session(int(raw), query_only, username)
        if answer.get("ok"):
            return web.json_response(answer)
        status = 404 if answer.get("code") == ErrorCode.NO_SUCH_THREAD else 403
        return web.json_response(answer, status=status)

    async def _pgsql_cancel(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        pid, key = (body or {}).get("pid"), (body or {}).get("key")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (pid, key)):
            return _error(400, "pid and key must be whole numbers")
        assert isinstance(pid, int) and isinstance(key, int)
        await self.provider.pgsql_cancel(pid, key)
        return web.json_response({"ok": True})

    async def _pgsql_close_idle(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        database = (body or {}).get("database")
        if not isinstance(database, str):
            return _error(400, "database must be a string")
        return web.json_response({"closed": await self.provider.pgsql_close_idle(database)})

    async def _advance_clock(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        seconds = (body or {}).get("advance_s")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            return _error(400, f"advance_s must be a number of seconds, not {seconds!r}")
        try:
            return web.json_response(await self.provider.advance_clock(float(seconds)))
        except ValueError as exc:
            return _error(400, str(exc))

    async def _set_worker_ports(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        body = body or {}
        ports = body.get("admin_ports")
        if not isinstance(ports, list) or not all(isinstance(p, int) and 0 <= p < 65536 for p in ports):
            return _error(400, "admin_ports must be a list of port numbers")
        try:
            await self.provider.set_worker_ports(ports)
        except LookupError as exc:
            return _error(404, str(exc))
        return web.json_response({"ok": True})

    async def _config(self, request: web.Request) -> web.Response:
        info = (await self.provider.stats_snapshot())["config"]
        document = await self.provider.config_document()
        if not self._shows_token(request):
            return web.json_response({**info, "document": mask_document(document), "secrets": "masked"})
        return web.json_response({**info, "document": document})

    async def _reload(self, request: web.Request) -> web.Response:
        document = await _json_object(request, "a JSON object (a config document)")
        if isinstance(document, web.Response):
            return document
        async with self._reload_lock:
            result = await self.provider.reload(document)
        if not result.ok:
            return web.json_response({"error": "the config was refused", **result.document()}, status=422)
        return web.json_response(result.document())

    async def _metrics(self, request: web.Request) -> web.Response:
        text = render_metrics(await self.provider.stats_snapshot())
        return web.Response(body=text.encode(), headers={"Content-Type": METRICS_CONTENT_TYPE})


def _loopback_host(host: str) -> bool:
    """Whether a request's Host (a name or address, with or without a port) is this machine's loopback."""
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        name = host.partition(":")[0]
    else:
        name = host  # a name without a port, or a bare IPv6 address
    name = name.lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _loopback(host: str) -> str:
    """``host`` if it is a loopback address ("localhost" means 127.0.0.1); the endpoint has no authentication."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return host.strip("[]")
    except ValueError:
        pass
    raise ValueError(f"the admin endpoint only binds to a loopback address (127.0.0.1, ::1), not {host!r}")


async def _json_object(request: web.Request, what: str = "a JSON object") -> dict[str, Any] | web.Response | None:
    """The request's JSON object body (None when there is none), or the 400 answer to send."""
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        body = read_json(raw)
    except ValueError as exc:
        return _error(400, f"the body is not valid JSON: {exc}")
    if not isinstance(body, dict):
        return _error(400, f"the body must be {what}, not {type(body).__name__}")
    return body


def _limit(request: web.Request) -> int | web.Response | None:
    """The ``?limit=N`` of a request (None without one), or the 400 answer to a limit that is not 0 or more."""
    if "limit" not in request.query:
        return None
    try:
        limit = int(request.query["limit"])
    except ValueError:
        return _error(400, f"limit must be a whole number, not {request.query['limit']!r}")
    return limit if limit >= 0 else _error(400, f"limit must be 0 or more, not {limit}")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Turn aiohttp's HTTP errors (404, 405, 413...) and unexpected exceptions into JSON errors."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            message = f"no such endpoint: {request.path}"
        elif exc.status == 405:
            message = f"{request.method} is not allowed on {request.path}"
        else:
            message = exc.text or exc.reason
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return _error(exc.status, message, allow)
    except Exception:
        log.exception("admin: %s %s failed", request.method, request.path)
        return _error(500, "internal error; see the proxy log")


# ---------------------------------------------------------------------------------------------------- /metrics


class _Exposition:
    """Builds Prometheus text exposition format 0.0.4, one metric family at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help: str, samples: Iterable[tuple[dict[str, str], float]]) -> None:
        """Add a family: its HELP and TYPE lines, then its samples (label set, value)."""
        self.lines.append(f"# HELP {name} {_escape_help(help)}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def text(self) -> str:
        """The whole exposition, newline-terminated."""
        return "\n".join(self.lines) + "\n"


def _escape_help(text: str) -> str:
    return shown(text).replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(value: str) -> str:
    """A label value as the text format writes it: a digest text's or schema's bytes that are not UTF-8 shown as
    ``\\xff`` (``shown``: the exposition is UTF-8), then backslash, quote and newline escaped."""
    return shown(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape_label(value)}"' for name, value in labels.items()) + "}"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _metric_name(variable: str) -> str:
    """``proxyfleet_`` and the lowercased variable name, with characters outside [a-z0-9_] replaced by '_'."""
    return "proxyfleet_" + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in variable.lower())


def _endpoint(row: dict[str, Any]) -> str:
    host = str(row["srv_host"])
    return f"[{host}]:{row['srv_port']}" if ":" in host else f"{host}:{row['srv_port']}"


def render_metrics(snapshot: dict[str, Any]) -> str:
    """A stats snapshot (see ``AdminProvider.stats_snapshot``) as Prometheus text exposition format 0.0.4."""
    out = _Exposition()
    _global_metrics(out, snapshot["global"])
    _pool_metrics(out, snapshot["connection_pool"])
    _digest_metrics(out, snapshot["query_digest"])
    _monitor_metrics(out, snapshot.get("monitor", []), snapshot.get("monitor_checks", []))
    if "query_digest_overflow" in snapshot:
        out.family(
            "proxyfleet_query_digest_overflow_total",
            "counter",
            "queries not recorded in the digest table because it was full",
            [({}, snapshot["query_digest_overflow"])],
        )
    workers = snapshot.get("memory", {}).get("workers", [])
    out.family(
        "proxyfleet_worker_resident_bytes",
        "gauge",
        "each worker process's resident memory",
        [({"pid": str(row["pid"])}, row["rss_bytes"]) for row in workers],
    )
    out.family(
        "proxyfleet_worker_memory_returned_bytes_total",
        "counter",
        "memory each worker gave back to the system after its buffers were freed",
        [({"pid": str(row["pid"])}, row["returned_bytes"]) for row in workers],
    )
    sharded = snapshot.get("sharding_digest", [])
    out.family(
        "proxyfleet_sharded_statements_total",
        "counter",
        "statements on sharded tables by the shards they reached: one, several (scatter) or refused",
        [({"reach": reach}, sum(row[reach] for row in sharded)) for reach in ("single_shard", "scatter", "refused")],
    )
    out.family(
        "proxyfleet_query_rule_hits_total",
        "counter",
        "queries each query rule matched",
        [({"rule_id": str(r["rule_id"])}, r["hits"]) for r in snapshot["query_rules"]],
    )
    _mirror_metrics(out, snapshot.get("mirror"))
    _trx_queue_metrics(out, snapshot.get("trx_queue"))
    _forward_metrics(out, snapshot.get("pgsql_forward"))
    config = snapshot["config"]
    out.family(
        "proxyfleet_config_info",
        "gauge",
        "the running config: its checksum and where it was loaded from (always 1)",
        [({"checksum": str(config["checksum"]), "source": str(config["source"])}, 1)],
    )
    out.family(
        "proxyfleet_config_loaded_timestamp_seconds",
        "gauge",
        "unix time the running config was loaded",
        [({}, config["loaded_at"])],
    )
    return out.text()


def _global_metrics(out: _Exposition, counters: dict[str, Any]) -> None:
    """stats_mysql_global: counters become ``proxyfleet_<name>_total``, gauges ``proxyfleet_<name>``."""
    for variable, value in counters.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        spec = COUNTERS.get(variable)
        if variable == "ProxySQL_Uptime":
            out.family("proxyfleet_uptime_seconds", "gauge", "seconds since the proxy started", [({}, value)])
        elif spec is None:  # a variable this module has no spec for: exported, but without a type
            out.family(_metric_name(variable), "untyped", f"stats_mysql_global {variable}", [({}, value)])
        elif spec.kind == "counter":
            out.family(_metric_name(variable) + "_total", "counter", f"{spec.help} ({variable})", [({}, value)])
        else:
            out.family(_metric_name(variable), "gauge", f"{spec.help} ({variable})", [({}, value)])


def _pool_metrics(out: _Exposition, rows: list[dict[str, Any]]) -> None:
    """stats_mysql_connection_pool, one series per server (hostgroup, endpoint)."""
    servers = [({"hostgroup": str(r["hostgroup"]), "endpoint": _endpoint(r)}, r) for r in rows]
    out.family(
        "proxyfleet_connpool_conns",
        "gauge",
        "backend connections in use and idle per server (ConnUsed, ConnFree)",
        [
            sample
            for labels, r in servers
            for sample in (({**labels, "status": "used"}, r["ConnUsed"]), ({**labels, "status": "free"}, r["ConnFree"]))
        ],
    )
    out.family(
        "proxyfleet_connpool_server_status",
        "gauge",
        "a server's status (ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD) as a label (always 1)",
        [({**labels, "status": str(r["status"])}, 1) for labels, r in servers],
    )
    for column, name, kind, help in (
        ("ConnOK", "proxyfleet_connpool_conns_ok_total", "counter", "backend connections opened successfully"),
        ("ConnERR", "proxyfleet_connpool_conns_err_total", "counter", "backend connection attempts that failed"),
        ("MaxConnUsed", "proxyfleet_connpool_conns_max_used", "gauge", "most backend connections in use at once"),
        ("Queries", "proxyfleet_connpool_queries_total", "counter", "queries sent to the server"),
        ("Bytes_data_sent", "proxyfleet_connpool_bytes_data_sent_total", "counter", "bytes sent to the server"),
        ("Bytes_data_recv", "proxyfleet_connpool_bytes_data_recv_total", "counter", "bytes received from the server"),
        ("Latency_us", "proxyfleet_connpool_latency_us", "gauge", "the server's measured latency in microseconds"),
    ):
        out.family(name, kind, f"{help} ({column})", [(labels, r[column]) for labels, r in servers])


def _monitor_metrics(out: _Exposition, servers: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    """The monitor's verdict per server (``monitor`` rows) and its checks' latest results (``monitor_checks``)."""
    labelled = [({"hostgroup": str(r["hostgroup"]), "endpoint": _endpoint(r)}, r) for r in servers]
    out.family(
        "proxyfleet_monitor_server_status",
        "gauge",
        "a server's status as the monitor decides it (ONLINE, SHUNNED, OFFLINE_*) as a label (always 1)",
        [({**labels, "status": str(r["status"])}, 1) for labels, r in labelled],
    )
    out.family(
        "proxyfleet_monitor_read_only",
        "gauge",
        "the server's read_only as the monitor last read it (1 or 0)",
        [(labels, int(r["read_only"])) for labels, r in labelled if r["read_only"] is not None],
    )
    out.family(
        "proxyfleet_monitor_replication_lag_seconds",
        "gauge",
        "the replica's lag as the monitor last measured it",
        [(labels, r["lag_s"]) for labels, r in labelled if r["lag_s"] is not None],
    )
    by_check = [({"check": str(r["check"]), "endpoint": _endpoint(r)}, r) for r in checks]
    out.family(
        "proxyfleet_monitor_check_latency_us",
        "gauge",
        "how long the monitor's latest check of the server took, in microseconds",
        [(labels, r["latency_us"]) for labels, r in by_check],
    )
    out.family(
        "proxyfleet_monitor_check_success",
        "gauge",
        "whether the monitor's latest check of the server succeeded (1) or failed (0)",
        [(labels, int(bool(r["ok"]))) for labels, r in by_check],
    )


def _digest_metrics(out: _Exposition, rows: list[dict[str, Any]]) -> None:
    """stats_mysql_query_digest summed over client addresses, for the busiest ``METRICS_TOP_DIGESTS`` series."""
    totals: dict[tuple[str, str, str, str], list[int]] = {}
    texts: dict[str, str] = {}
    for r in rows:
        key = (str(r["digest"]), str(r["hostgroup"]), str(r["username"]), str(r["schemaname"]))
        total = totals.setdefault(key, [0, 0])
        total[0] += r["count_star"]
        total[1] += r["sum_time"]
        texts[key[0]] = str(r["digest_text"])
    top = sorted(totals.items(), key=lambda item: item[1][0], reverse=True)[:METRICS_TOP_DIGESTS]
    series = [
        ({"digest": digest, "hostgroup": hg, "username": user, "schemaname": schema}, count, time_us)
        for (digest, hg, user, schema), (count, time_us) in top
    ]
    out.family(
        "proxyfleet_query_digest_count_total",
        "counter",
        f"queries per digest, hostgroup, user and schema (the {METRICS_TOP_DIGESTS} busiest)",
        [(labels, count) for labels, count, _ in series],
    )
    out.family(
        "proxyfleet_query_digest_time_us_total",
        "counter",
        f"microseconds spent per digest, hostgroup, user and schema (the {METRICS_TOP_DIGESTS} busiest)",
        [(labels, time_us) for labels, _, time_us in series],
    )
    exported = dict.fromkeys(labels["digest"] for labels, _, _ in series)
    out.family(
        "proxyfleet_query_digest_info",
        "gauge",
        f"the normalized text of each exported digest, cut at {METRICS_DIGEST_TEXT_MAX} characters (always 1)",
        [({"digest": d, "digest_text": texts[d][:METRICS_DIGEST_TEXT_MAX]}, 1) for d in exported],
    )


def _mirror_metrics(out: _Exposition, mirror: object) -> None:
    """The mirror's failures by error code and drops by reason (its totals and gauges are ``Mirror_*`` globals)."""
    if not isinstance(mirror, dict):
        return
    for key, name, label, help in (
        ("failed", "proxyfleet_mirror_failed_by_code_total", "code", "mirrored queries that failed, by error code"),
        ("dropped", "proxyfleet_mirror_dropped_by_reason_total", "reason", "mirrored queries dropped, by reason"),
    ):
        counts = mirror.get(key)
        if isinstance(counts, dict):
            out.family(name, "counter", help, [({label: str(k)}, v) for k, v in counts.items() if isinstance(v, int)])


def _trx_queue_metrics(out: _Exposition, section: object) -> None:
    """The hot-row queues (``proxyapp.hotrows``), one series per queue, and the standing proposals."""
    if not isinstance(section, dict):
        return
    queues = [({"queue": str(row["queue"])}, row) for row in section.get("queues", [])]
    for column, name, kind, help in (
        ("keys_active", "proxyfleet_trx_queue_keys_active", "gauge", "keys held by a transaction now"),
        ("waiters", "proxyfleet_trx_queue_waiters", "gauge", "transactions waiting in line for a key now"),
        ("transactions", "proxyfleet_trx_queue_transactions_total", "counter", "keys granted to transactions"),
        ("timeouts", "proxyfleet_trx_queue_timeouts_total", "counter", "waits past mysql-trx_queue_wait_timeout_ms"),
        ("refused", "proxyfleet_trx_queue_refused_total", "counter", "waits refused: mysql-trx_queue_max_waiters"),
    ):
        out.family(name, kind, help, [(labels, row[column]) for labels, row in queues])
    out.family(
        "proxyfleet_trx_queue_longest_wait_seconds",
        "gauge",
        "how long the longest waiting transaction has waited",
        [(labels, row["longest_wait_ms"] / 1000) for labels, row in queues],
    )
    out.family(
        "proxyfleet_trx_queue_proposals",
        "gauge",
        "hot keys the proxy found by itself, proposed or applied",
        [
            ({"state": state}, sum(p["state"] == state for p in section.get("proposals", [])))
            for state in ("proposed", "applied")
        ],
    )


def _forward_metrics(out: _Exposition, section: object) -> None:
    """The forwarding listeners (``proxyapp.forward``), one series per port."""
    if not isinstance(section, dict):
        return
    ports = [({"port": str(row["port"])}, row) for row in section.get("listeners", [])]
    for column, name, kind, help in (
        ("connections_active", "proxyfleet_pgsql_forward_connections_active", "gauge", "clients forwarded now"),
        ("connections_total", "proxyfleet_pgsql_forward_connections_total", "counter", "clients accepted"),
        (
            "connections_refused",
            "proxyfleet_pgsql_forward_connections_refused_total",
            "counter",
            "clients refused: the listener's max_connections",
        ),
        (
            "connections_spliced",
            "proxyfleet_pgsql_forward_connections_spliced_total",
            "counter",
            "clients whose bytes the C relay passed",
        ),
    ):
        out.family(name, kind, help, [(labels, row[column]) for labels, row in ports])
    out.family(
        "proxyfleet_pgsql_forward_bytes_total",
        "counter",
        "bytes forwarded, by direction",
        [
            ({**labels, "direction": direction}, row[column])
            for labels, row in ports
            for direction, column in (("from_clients", "bytes_from_clients"), ("to_clients", "bytes_to_clients"))
        ],
    )

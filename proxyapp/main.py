"""Running a proxy: ``serve`` runs one from a config file (in this process, or as a supervisor of worker processes
when ``mysql-threads`` asks for several), ``serve_worker`` is one such worker process. The CLI (``__main__``) and
the node agent (``node``) start here; the proxy (``server``) and the supervisor (``workers``) know nothing of each
other.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from proxyapp import credential
from proxyapp.clients.seats import Seats
from proxyapp.config.document import load_config_file, parse_config
from proxyapp.config.jsontext import read_json
from proxyapp.process.server import Proxy, parse_address
from proxyapp.process.workers import Supervisor, worker_count
from proxyapp.sharding.nodeblocks import NodeBlocks

log = logging.getLogger("proxyapp")


async def serve(
    config_path: Path, listen: tuple[str, int] | None, admin: tuple[str, int] | None, token_path: Path | None = None
) -> None:
    """Run a proxy from a config file until SIGINT/SIGTERM; SIGHUP reloads the file.

    The admin credential is read from ``token_path`` (default: ``admin.token`` beside the config file), created
    there at the first start. With ``mysql-threads`` above 1 (and more than one CPU) the work is spread over worker
    processes.
    """
    config = load_config_file(config_path)
    token = credential.load_or_create(token_path or credential.default_path(config_path))
    v = config.variables
    if listen is None:
        listen = parse_address(v.text("mysql-interfaces"), 6033)
    if admin is None and v.flag("admin-restapi_enabled"):
        admin = (v.text("admin-restapi_interface"), v.integer("admin-restapi_port"))
    workers = worker_count(config)
    if workers > 1:
        await Supervisor(config, config_path, workers, token).run(listen, admin)
        return
    proxy = Proxy(config, config_path, admin_token=token)
    await proxy.start(listen, admin)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGHUP, proxy.reload_file)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    log.info("shutting down")
    await proxy.stop()


async def serve_worker(
    listen_fd: int, index: int, count: int, config_path: Path, seats_fd: int, sequences_fd: int, hot_rows_fd: int
) -> None:
    """A worker process: the admin token (a line) and the config document come on stdin, the admin port goes to
    stdout; ``seats_fd`` is the node's shared session count, ``sequences_fd`` its sequences' blocks, ``hot_rows_fd``
    its socket to the supervisor's hot-row lines."""
    token, _, document = sys.stdin.read().partition("\n")
    config = parse_config(read_json(document))
    seats = Seats(seats_fd, index, count)
    blocks = NodeBlocks(sequences_fd)
    proxy = Proxy(
        config,
        config_path,
        worker=index,
        workers=count,
        seats=seats,
        blocks=blocks,
        admin_token=token,
        hot_rows_fd=hot_rows_fd,
    )
    sock = socket.socket(fileno=listen_fd)
    await proxy.start(("", 0), ("127.0.0.1", 0), sock=sock)
    assert proxy.admin is not None
    sys.stdout.write(f"ADMIN_PORT {proxy.admin.port}\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, lambda: None)  # the supervisor decides when workers stop
    loop.add_signal_handler(signal.SIGHUP, lambda: None)
    parent = os.getppid()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1)
        except TimeoutError:
            if os.getppid() != parent:  # the supervisor is gone
                break
    await proxy.stop()

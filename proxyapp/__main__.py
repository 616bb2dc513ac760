"""Command line: ``python -m proxyapp run --config CONFIG.json [--listen HOST:PORT] [--admin HOST:PORT]``, or as a node
of a fleet: ``python -m proxyapp run --node NAME --broker REDIS_URL [--state-dir DIR] ...``
(see ``proxyapp.node.node``)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from pathlib import Path

from proxyapp.config.document import ConfigError, load_config_file
from proxyapp.credential import CredentialError
from proxyapp.main import serve, serve_worker
from proxyapp.node.node import (
    BROKER_ENV,
    SIGNING_PUBLIC_KEY_ENV,
    NodeStore,
    agent_argv,
    check_node_name,
    parse_hostgroups,
    serve_node,
)
from proxyapp.node.signature import public_keys_from_text
from proxyapp.process.server import parse_address

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"


#: Allocations (net of frees) between two collections of the youngest generation of cyclic garbage: Python's
#: default is 700. Each collection walks every young object still alive, and with a thousand commands in flight
#: that is every one of their coroutines and futures: at 700, collections took 15 % of the proxy's instructions at
#: 1,000 connections (callgrind). Nearly everything a query allocates is freed by reference counting at once.
YOUNG_COLLECTION_THRESHOLD = 50_000


def collect_cycles_less_often() -> None:
    """Tune the cyclic garbage collector for a proxy process: what exists once it has started (modules, config) is
    never walked again (``gc.freeze``), and young objects are collected every ``YOUNG_COLLECTION_THRESHOLD`` net
    allocations instead of 700."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m proxyapp", description="ProxyFleet MySQL proxy worker")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="serve MySQL clients")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, help="the config document (JSON)")
    source.add_argument("--node", help="run as this node of a fleet: its last applied config, and the agent beside it")
    run.add_argument(
        "--broker",
        default=os.environ.get(BROKER_ENV, DEFAULT_BROKER),
        help=f"(--node) Celery broker URL (default: ${BROKER_ENV}; prefer it when the URL holds a password)",
    )
    run.add_argument(
        "--signing-public-key",
        default=os.environ.get(SIGNING_PUBLIC_KEY_ENV) or None,
        help=f"(--node) refuse configs not signed by the control plane holding this key's private half; several "
        f"keys, comma-separated, while it changes keys (default: ${SIGNING_PUBLIC_KEY_ENV}; "
        "`manage.py signing-public-key` prints it)",
    )
    run.add_argument("--state-dir", type=Path, help="(--node) the node's state directory (default var/nodes/NAME)")
    run.add_argument("--allowed-hostgroups", help="(--node) refuse configs with servers outside these, e.g. 10,20")
    run.add_argument("--report-interval", type=float, default=5.0, help="(--node) seconds between reports")
    run.add_argument("--listen", help="HOST:PORT for MySQL clients (default: mysql-interfaces)")
    run.add_argument("--admin", help="HOST:PORT of the HTTP admin endpoint (default: admin-restapi_*)")
    run.add_argument(
        "--admin-token-file",
        type=Path,
        help="the admin credential's file (default: admin.token beside the config; created 0600 if missing)",
    )
    run.add_argument("--log-level", default="INFO")
    sub.add_parser("build", help="compile the hot modules with mypyc (see proxyapp.native)")
    check = sub.add_parser("check", help="validate a config document and print its warnings")
    check.add_argument("--config", required=True, type=Path)
    worker = sub.add_parser("worker", help="(internal) one worker process, started by `run`")
    worker.add_argument("--listen-fd", required=True, type=int)
    worker.add_argument("--index", required=True, type=int)
    worker.add_argument("--count", required=True, type=int)
    worker.add_argument("--config-path", required=True, type=Path)
    worker.add_argument("--seats-fd", required=True, type=int)
    worker.add_argument("--sequences-fd", required=True, type=int)
    worker.add_argument("--hot-rows-fd", required=True, type=int)
    worker.add_argument("--log-level", default="INFO")
    agent = sub.add_parser("agent", help="(internal) the node agent, started by `run --node`")
    agent.add_argument("--node", required=True)
    agent.add_argument("--admin", required=True, help="HOST:PORT of the proxy's admin endpoint")
    agent.add_argument("--state-dir", required=True, type=Path)
    agent.add_argument("--allowed-hostgroups")
    agent.add_argument("--signing-public-key")
    agent.add_argument("--report-interval", type=float, default=5.0)
    agent.add_argument("--parent-pid", type=int, help="stop when this process is gone")
    agent.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

    if args.command == "build":
        from proxyapp.native import build

        return build()
    if args.command == "check":
        try:
            config = load_config_file(args.config)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 1
        for warning in config.warnings:
            print(f"warning: {warning}")
        print(f"ok: checksum {config.checksum}")
        return 0

    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s %(levelname)s {os.getpid()} %(name)s: %(message)s"
    )
    collect_cycles_less_often()
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    if args.command == "worker":
        runner(
            serve_worker(
                args.listen_fd,
                args.index,
                args.count,
                args.config_path,
                args.seats_fd,
                args.sequences_fd,
                args.hot_rows_fd,
            )
        )
        return 0
    if args.command == "agent":
        return _agent(args)
    try:
        listen = parse_address(args.listen, 6033) if args.listen else None
        admin = parse_address(args.admin, 6070) if args.admin else None
        if args.node:
            check_node_name(args.node)
            if args.allowed_hostgroups:
                parse_hostgroups(args.allowed_hostgroups)
            if args.signing_public_key:
                public_keys_from_text(args.signing_public_key)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        if args.node:
            admin = admin or ("127.0.0.1", 6070)  # fixed for the node's life: its agent drives it there
            store = NodeStore(args.state_dir or Path("var", "nodes", args.node))
            command = agent_argv(
                args.node,
                admin,
                store.directory,
                allowed_hostgroups=args.allowed_hostgroups,
                signing_public_key=args.signing_public_key,
                report_interval=args.report_interval,
                log_level=args.log_level,
            )
            runner(serve_node(store, listen, admin, command, args.broker))
        else:
            runner(serve(args.config, listen, admin, args.admin_token_file))
    except (ConfigError, CredentialError) as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def _agent(args: argparse.Namespace) -> int:
    """The ``agent`` command."""
    from proxyapp.node.agent import AgentSettings, run_agent

    broker = os.environ.get(BROKER_ENV)
    if not broker:
        print(f"agent: no broker URL in ${BROKER_ENV} (`run --node` sets it)", file=sys.stderr)
        return 2
    try:
        settings = AgentSettings(
            node=check_node_name(args.node),
            broker=broker,
            admin=parse_address(args.admin, 6070),
            state_dir=args.state_dir,
            report_interval=args.report_interval,
            allowed_hostgroups=parse_hostgroups(args.allowed_hostgroups) if args.allowed_hostgroups else None,
            signing_public_keys=public_keys_from_text(args.signing_public_key) if args.signing_public_key else (),
        )
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        run_agent(settings, args.parent_pid, args.log_level.upper())
    except CredentialError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

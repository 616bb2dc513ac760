"""Command line: ``python -m proxyapp run --config CONFIG.json [--listen HOST:PORT] [--admin HOST:PORT]``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from proxyapp.config import ConfigError, load_config_file
from proxyapp.server import parse_address, serve
from proxyapp.workers import serve_worker


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m proxyapp", description="ProxyFleet MySQL proxy worker")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="serve MySQL clients")
    run.add_argument("--config", required=True, type=Path, help="the config document (JSON)")
    run.add_argument("--listen", help="HOST:PORT for MySQL clients (default: mysql-interfaces)")
    run.add_argument("--admin", help="HOST:PORT of the HTTP admin endpoint (default: admin-restapi_*)")
    run.add_argument("--log-level", default="INFO")
    check = sub.add_parser("check", help="validate a config document and print its warnings")
    check.add_argument("--config", required=True, type=Path)
    worker = sub.add_parser("worker", help="(internal) one worker process, started by `run`")
    worker.add_argument("--listen-fd", required=True, type=int)
    worker.add_argument("--index", required=True, type=int)
    worker.add_argument("--count", required=True, type=int)
    worker.add_argument("--config-path", required=True, type=Path)
    worker.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

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
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    if args.command == "worker":
        runner(serve_worker(args.listen_fd, args.index, args.count, args.config_path))
        return 0
    try:
        listen = parse_address(args.listen, 6033) if args.listen else None
        admin = parse_address(args.admin, 6070) if args.admin else None
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        runner(serve(args.config, listen, admin))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

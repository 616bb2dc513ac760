"""The proxy's hot modules compiled to C with mypyc, and the loader that prefers them while they are fresh.

``python -m proxyapp build`` (``make build``; ``make run`` and ``make test`` do it) compiles ``COMPILED`` and the C
extensions of ``EXTENSIONS`` into ``var/build/native`` and writes a stamp: a hash of those sources, the Python version
and mypy's version.
Each package of ``proxyapp`` calls ``prefer_compiled`` from its ``__init__``: when the stamp matches the sources on
disk, the compiled directory goes first on the package's path, so ``import proxyapp.session.session`` loads the C
extension; when it does not (a module was edited since the build, or nothing was built), the plain Python
modules load, unchanged in behaviour, only slower (a C extension has no plain twin: its callers fall back to Python
code of their own when it does not import). A stale build is therefore never run.
``PROXYFLEET_NATIVE=0`` forces the plain modules.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO = PACKAGE_DIR.parent
BUILD_DIR = REPO / "var" / "build" / "native"
STAMP = BUILD_DIR / "STAMP"

#: The modules compiled, relative to the repository: the per-query path and what it touches.
COMPILED = (
    "proxyapp/backends/pool.py",
    "proxyapp/clock.py",
    "proxyapp/config/rulecompile.py",
    "proxyapp/driver.py",
    "proxyapp/forward/relay.py",
    "proxyapp/hotrows/heat.py",
    "proxyapp/hotrows/marks.py",
    "proxyapp/hotrows/queues.py",
    "proxyapp/mirror/counts.py",
    "proxyapp/mirror/lanes.py",
    "proxyapp/mirror/mirror.py",
    "proxyapp/mirror/ordered.py",
    "proxyapp/mirror/proxysql_mode.py",
    "proxyapp/mirror/tap.py",
    "proxyapp/mirror/units.py",
    "proxyapp/mysql/backend.py",
    "proxyapp/mysql/compression.py",
    "proxyapp/mysql/packets.py",
    "proxyapp/mysql/stream.py",
    "proxyapp/mysql/tls.py",
    "proxyapp/mysql/wire.py",
    "proxyapp/pgproxy/caching.py",
    "proxyapp/pgproxy/client_pids.py",
    "proxyapp/pgproxy/host.py",
    "proxyapp/pgproxy/link.py",
    "proxyapp/pgproxy/pool.py",
    "proxyapp/pgproxy/prepared.py",
    "proxyapp/pgproxy/responses.py",
    "proxyapp/pgproxy/routing.py",
    "proxyapp/pgproxy/session.py",
    "proxyapp/pgproxy/settings.py",
    "proxyapp/pgproxy/statements.py",
    "proxyapp/pgproxy/timeout.py",
    "proxyapp/pgsql/messages.py",
    "proxyapp/pgsql/wire.py",
    "proxyapp/process/server.py",
    "proxyapp/report/stats.py",
    "proxyapp/rules/cache.py",
    "proxyapp/rules/engine.py",
    "proxyapp/rules/runtime.py",
    "proxyapp/session/accounting.py",
    "proxyapp/session/client.py",
    "proxyapp/session/decide.py",
    "proxyapp/session/events.py",
    "proxyapp/session/limits.py",
    "proxyapp/session/link.py",
    "proxyapp/session/login.py",
    "proxyapp/session/prepared.py",
    "proxyapp/session/query.py",
    "proxyapp/session/relay.py",
    "proxyapp/session/route.py",
    "proxyapp/session/services.py",
    "proxyapp/session/session.py",
    "proxyapp/session/sharded/router.py",
    "proxyapp/session/sharded/transactions.py",
    "proxyapp/session/state.py",
    "proxyapp/session/statements.py",
    "proxyapp/session/track.py",
    "proxyapp/session/trxqueue.py",
    "proxyapp/sharding/gather.py",
    "proxyapp/sharding/merge.py",
    "proxyapp/sharding/physical.py",
    "proxyapp/sharding/placement.py",
    "proxyapp/sharding/plan.py",
    "proxyapp/sharding/shardmap.py",
    "proxyapp/sql/analysis.py",
    "proxyapp/sql/constant.py",
    "proxyapp/sql/digest.py",
    "proxyapp/sql/lex.py",
    "proxyapp/sql/scan.py",
    "proxyapp/sql/where.py",
)

#: The C extensions built with them: (dotted module name, source relative to the repository).
EXTENSIONS = (
    ("proxyapp.forward._splice", "proxyapp/forward/_splice.c"),
    ("proxyapp.mysql._walk", "proxyapp/mysql/_walk.c"),
    ("proxyapp.mysql._bytes", "proxyapp/mysql/_bytes.c"),
    ("proxyapp.mysql._sockio", "proxyapp/mysql/_sockio.c"),
    ("proxyapp._send", "proxyapp/_send.c"),
    ("proxyapp.sql._shape", "proxyapp/sql/_shape.c"),
)


def source_stamp() -> str:
    """What a build of the current sources is stamped with."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\n{platform.machine()}\n{_mypy_version()}\n".encode())
    for name in (*COMPILED, *(source for _, source in EXTENSIONS)):
        digest.update(name.encode() + b"\0" + (REPO / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _mypy_version() -> str:
    try:
        from importlib.metadata import version

        return version("mypy")
    except Exception:  # mypy missing: no build can match
        return "none"


def is_fresh() -> bool:
    """Whether ``BUILD_DIR`` holds a build of exactly the current sources."""
    try:
        return STAMP.read_text().strip() == source_stamp()
    except OSError:
        return False


_fresh: bool | None = None


def prefer_compiled(package: str, path: list[str]) -> None:
    """Put the compiled modules of ``package`` (a package's ``__path__``) first, if the build is fresh."""
    global _fresh
    if os.environ.get("PROXYFLEET_NATIVE", "1") == "0":
        return
    if _fresh is None:
        _fresh = is_fresh()
        if _fresh and str(BUILD_DIR) not in sys.path:
            sys.path.append(str(BUILD_DIR))  # mypyc's shared library of all the modules sits at the top
    if _fresh:
        path.insert(0, str(BUILD_DIR.joinpath(*package.split("."))))


def compiled_modules() -> list[str]:
    """The dotted names of the modules running compiled in this process."""
    names = [name.removesuffix(".py").replace("/", ".") for name in COMPILED]
    return [n for n in names if n in sys.modules and str(getattr(sys.modules[n], "__file__", "")).endswith(".so")]


def build() -> int:
    """Compile ``COMPILED`` and ``EXTENSIONS`` into ``BUILD_DIR`` and stamp it; returns a process exit code.

    Builds from several processes at once take turns (a lock file), and the later ones find the work done.
    """
    import fcntl

    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    with (BUILD_DIR.parent / "native.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked()


def _build_locked() -> int:
    import shutil
    import subprocess
    import tempfile

    stamp = source_stamp()
    if is_fresh():
        print(f"native build is up to date ({BUILD_DIR.relative_to(REPO)})")
        return 0
    # setuptools runs mypyc (C files into temp/c) and the compiler (objects into temp/o, -j jobs); the C extensions
    # come as one argument, "name=source" pairs separated by commas.
    script = (
        "import sys\n"
        "from setuptools import Extension, setup\n"
        "from mypyc.build import mypycify\n"
        "lib, temp, jobs, extensions, *modules = sys.argv[1:]\n"
        "ext = mypycify(modules, opt_level='3', debug_level='0', target_dir=temp + '/c')\n"
        "for pair in filter(None, extensions.split(',')):\n"
        "    name, source = pair.split('=')\n"
        "    ext.append(Extension(name, [source]))\n"
        "setup(name='proxyapp-native', ext_modules=ext, packages=[], py_modules=[],\n"
        "      script_args=['build_ext', '--build-lib', lib, '--build-temp', temp + '/o', '-j', jobs])\n"
    )
    staging = BUILD_DIR.with_name("native.new")
    shutil.rmtree(staging, ignore_errors=True)
    print(
        f"compiling {len(COMPILED)} modules with mypyc into {BUILD_DIR.relative_to(REPO)}: type-checking first, then "
        "the C compiler (a few minutes the first time on 2 CPUs; later builds reuse mypy's cache)",
        flush=True,
    )
    extension_list = ",".join(f"{name}={source}" for name, source in EXTENSIONS)
    output: list[str] = []
    with tempfile.TemporaryDirectory(prefix="proxyapp-native-") as temp:
        env = dict(os.environ, MYPY_CACHE_DIR=str(BUILD_DIR.with_name("mypy-cache")))
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(staging), temp, str(os.cpu_count() or 1), extension_list, *COMPILED],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if line.startswith("building '"):
                print(f"  {line.strip()}", flush=True)
            elif " -c " in line and ".c -o " in line:  # a compiler invocation: name the C file it compiles
                source = line.split(" -c ", 1)[1].split()[0]
                print(f"  compiling {Path(source).name}", flush=True)
        returncode = proc.wait()
    if returncode != 0:
        print("".join(output)[-40000:], file=sys.stderr)
        print("native build failed: the proxy runs its plain Python modules", file=sys.stderr)
        shutil.rmtree(staging, ignore_errors=True)
        return returncode
    (staging / "STAMP").write_text(stamp + "\n")
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    staging.rename(BUILD_DIR)
    print(
        f"native build done: {len(COMPILED)} modules and {len(EXTENSIONS)} C extension(s) in "
        f"{BUILD_DIR.relative_to(REPO)}"
    )
    return 0

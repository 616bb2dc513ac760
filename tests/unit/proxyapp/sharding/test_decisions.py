"""The XA decision log on disk: what reopening it (a restart) keeps, a torn last line, the order of a commit
decision's write, sync and effect, its permissions, and the gtrids it makes."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from proxyapp.sharding.decisions import DecisionLog, log_path, orphaned_workers

PREFIX = "pftest.0."
SERVERS = ["10.0.0.1:3306", "10.0.0.2:3306"]


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_log(path: Path, steps: list[tuple[str, str]]) -> DecisionLog:
    """Open the log at ``path``, apply ``steps`` ("begin"/"commit"/"finish", xid), close it; the log as it was."""

    async def run() -> DecisionLog:
        log = DecisionLog.open(path, PREFIX)
        for step, xid in steps:
            if step == "begin":
                log.begin(xid, SERVERS, "app")
            elif step == "commit":
                await log.decide_commit(xid)
            else:
                log.finish(xid)
        await log.close()
        return log

    return asyncio.run(run())


def test_reopening_keeps_only_the_unfinished_xids_and_their_decisions(tmp_path: Path) -> None:
    path = log_path(tmp_path / "xa", 0)
    run_log(path, [("begin", "a"), ("begin", "b"), ("begin", "c"), ("commit", "b"), ("commit", "c")])
    run_log(path, [("finish", "c"), ("finish", "a")])
    # rewritten on reopening (each xid's records together), then appended to
    assert [(r["xid"], r["state"]) for r in records(path)][-3:] == [("c", "commit"), ("c", "done"), ("a", "done")]

    reopened = DecisionLog.open(path, PREFIX)
    assert list(reopened.entries) == ["b"]
    assert reopened.committed("b") and reopened.entries["b"].servers == tuple(SERVERS)
    assert reopened.entries["b"].user == "app"
    assert reopened.pending() == reopened.entries  # nothing of a past run is in flight
    assert records(path) == [
        {"xid": "b", "state": "prepare", "servers": SERVERS, "user": "app"},
        {"xid": "b", "state": "commit"},
    ]
    asyncio.run(reopened.close())


def test_an_unfinished_xid_without_a_decision_is_kept_as_not_committed(tmp_path: Path) -> None:
    path = log_path(tmp_path, 1)
    run_log(path, [("begin", "a")])
    reopened = DecisionLog.open(path, PREFIX)
    assert list(reopened.pending()) == ["a"] and not reopened.committed("a")
    asyncio.run(reopened.close())


def test_a_torn_last_line_and_an_unreadable_one_are_ignored(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    run_log(path, [("begin", "a"), ("begin", "b"), ("commit", "a")])
    with path.open("a") as f:
        f.write('{"xid":"x","state":"garbage"}\n')
        f.write('{"xid":"b","state":"comm')  # the crash cut this one short: b was never decided
    reopened = DecisionLog.open(path, PREFIX)
    assert {xid: entry.commit for xid, entry in reopened.entries.items()} == {"a": True, "b": False}

    reopened.begin("c", SERVERS, "app")  # appended on a line of its own: the torn tail is gone
    asyncio.run(reopened.close())
    assert [r["xid"] for r in records(path)] == ["a", "a", "b", "c"]


def test_a_commit_decision_counts_only_once_written_and_synced(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)

    async def run() -> None:
        log = DecisionLog.open(path, PREFIX)
        log.begin("a", SERVERS, "app")
        log.begin("b", SERVERS, "app")
        log.write_commit("a")
        log.write_commit("b")  # both records written, neither synced yet
        assert [r["state"] for r in records(path)] == ["prepare", "prepare", "commit", "commit"]
        assert not log.committed("a") and not log.committed("b")
        await asyncio.gather(log.synced("a"), log.synced("b"))
        assert log.committed("a") and log.committed("b")
        await log.close()

    asyncio.run(run())


def test_the_log_is_private_to_its_owner(tmp_path: Path) -> None:
    directory = tmp_path / "xa"
    directory.mkdir(mode=0o755)
    path = log_path(directory, 0)
    run_log(path, [("begin", "a")])
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in directory.iterdir()] == [path.name]  # no temporary file left by the compaction


def test_gtrids_differ_across_transactions_and_runs_and_fit_mariadb(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    first = DecisionLog.open(path, "pf0123456789.12.")
    made = {first.new_xid() for _ in range(1000)}
    asyncio.run(first.close())
    second = DecisionLog.open(path, "pf0123456789.12.")
    made |= {second.new_xid() for _ in range(1000)}
    asyncio.run(second.close())
    assert len(made) == 2000
    assert all(xid.startswith("pf0123456789.12.") and len(xid) <= 64 for xid in made)
    with pytest.raises(ValueError):
        DecisionLog.open(path, "it's")


def test_the_logs_of_workers_no_longer_running_are_found(tmp_path: Path) -> None:
    for worker in (0, 1, 2, 10):
        log_path(tmp_path, worker).touch()
    (tmp_path / "worker-3.xa.tmp").touch()
    assert orphaned_workers(tmp_path, 2) == [2, 10]
    assert orphaned_workers(tmp_path, 11) == []

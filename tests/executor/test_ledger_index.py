"""The ledger's SQLite index: every listing through it, exact after a crash, rebuilt from
the files when deleted, truncated or forged, and 32 writers at once lose no row."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from executor.api import Corral
from executor.cli.app import main
from executor.errors import ExecutorError
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    Filters,
    RunRecord,
    RunStatus,
    delete_run,
    discard_run,
    finalize_crashed,
    find_fanout,
    find_run,
    iter_entries,
    ledger_dir,
    page,
    rebuild,
    set_run_check,
    set_run_state,
    write_fanout,
    write_run,
)
from executor.ledger.imports import follow_run, land_run, pack_run
from executor.ledger.index import RUN_COLUMNS, index_dir
from executor.mcpserver.arguments import ListRunsArgs
from executor.mcpserver.handlers import ServerOptions
from executor.mcpserver.listing import list_runs_tool
from executor.scheduling import Cancellation, Deadline, Handle, Job, JobContext
from executor.scheduling.local import LocalScheduler
from executor.web.views import PAGE_ENTRIES, runs_page
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]


def record(run_id: str, started: str, **fields: object) -> RunRecord:
    base: dict[str, object] = {
        "run_id": run_id, "agent": "a", "agent_format": "ngn", "agent_source": "a.md",
        "contract_digest": "d", "prompt": f"task {run_id}\nmore lines", "backend": "host",
        "mode": "worktree", "status": RunStatus.COMPLETED, "started_at": started,
        "finished_at": started, "diff": "diff --git a/x b/x\n",
        "changed_files": [{"path": "x", "status": "modified"}]}
    return RunRecord.model_validate(base | fields)


def at(n: int) -> str:
    return f"2026-12-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000+00:00"


def rid(n: int) -> str:
    return f"20261201-{n:06d}-abcdef"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    owned = tmp_path / "owned"
    (owned / "repo" / ".git").mkdir(parents=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(owned / "state"))
    return owned / "repo"


def rows(ledger: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(index_dir(ledger) / "index.sqlite")
    try:
        runs = conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs")  # noqa: S608
        return sorted(runs) + sorted(conn.execute(
            "SELECT fanout_id, status, created, finished, prompt, check_command, backend, "
            "children, data FROM fanouts"))
    finally:
        conn.close()


def corral(*args: str) -> tuple[int, str, str]:
    """The CLI as ``corral`` runs it (errors rendered, exit codes from their families)."""
    with CliRunner().isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, out.getvalue().decode(), err.getvalue().decode()


def filled(repo: Path, count: int = 6) -> Path:
    ledger = ledger_dir(repo)
    for n in range(count):
        write_run(ledger, record(rid(n), at(n), agent="b" if n % 2 else "a",
                                 status=RunStatus.FAILED if n == 3 else RunStatus.COMPLETED),
                  [])
    return ledger


def test_runs_pages_and_filters_through_the_cli(repo: Path) -> None:
    ledger = filled(repo)
    set_run_state(ledger, rid(4), "applied")
    code, out, err = corral("runs", "--root", str(repo), "-n", "2")
    assert code == 0
    _header, first, second = out.splitlines()
    assert first.startswith(rid(5)) and second.startswith(rid(4)) and "applied" in second
    assert '"task 20261201-000005-abcdef more lines"' in first  # its prompt, one line
    assert f"--after {rid(4)}" in err
    _, out, err = corral("runs", "--root", str(repo), "-n", "2", "--after", rid(4))
    assert [line.split()[0] for line in out.splitlines()[1:]] == [rid(3), rid(2)]
    _, out, _ = corral("runs", "--root", str(repo), "--agent", "b", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [rid(5), rid(3), rid(1)]
    _, out, _ = corral("runs", "--root", str(repo), "--status", "failed", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [rid(3)]
    _, out, _ = corral("runs", "--root", str(repo), "--pending", "--json")
    assert rid(4) not in out and rid(5) in out
    _, out, _ = corral("runs", "--root", str(repo), "--since", "2026-12-01T00:00:04",
                       "--json")
    assert [r["run_id"] for r in json.loads(out)] == [rid(5), rid(4)]
    code, _, err = corral("runs", "--root", str(repo), "--since", "yesterday")
    assert code == 2 and "neither a duration nor a time" in err
    code, _, err = corral("runs", "--root", str(repo), "--after", "20261201-999999-ffffff")
    assert code == 2 and "no run or fanout has this id" in err
    _, out, _ = corral("show", "last", "--root", str(repo), "--json")
    assert json.loads(out)["run_id"] == rid(5)
    _, out, _ = corral("show", "last~2", "--root", str(repo), "--json")
    assert json.loads(out)["run_id"] == rid(3)


def test_a_fanout_is_one_entry_with_its_children(repo: Path) -> None:
    ledger = filled(repo, 2)
    fid = "f-20261201-000100-abcdef"
    children = [FanoutChild(index=i + 1, run_id=rid(100 + i), agent="a") for i in range(3)]
    write_fanout(ledger, FanoutRecord(fanout_id=fid, prompt="many", created_at=at(100),
                                      status="completed", children=children))
    for i in range(2):  # the third child never started
        write_run(ledger, record(rid(100 + i), at(101 + i), fanout=fid), [])
    _, out, _ = corral("runs", "--root", str(repo), "-n", "1")
    lines = out.splitlines()
    assert lines[1].startswith(f"fanout {fid}  completed 3 child(ren)")
    assert lines[2].startswith(f"  #1  {rid(100)}") and lines[3].startswith(f"  #2  {rid(101)}")
    assert lines[4] == f"  #3  {rid(102)}  not started (no record)"
    _, out, _ = corral("runs", "--root", str(repo), "--fanout", fid[:12], "--json")
    listed = json.loads(out)
    assert listed[0]["fanout_id"] == fid and [r["run_id"] for r in listed[1:]] == [
        rid(100), rid(101)]


def test_every_other_reader_pages_from_the_index(repo: Path) -> None:
    ledger = filled(repo, PAGE_ENTRIES + 5)
    first = runs_page(Corral(repo))
    assert len(first["rows"]) == PAGE_ENTRIES and first["next_after"] == rid(5)
    second = runs_page(Corral(repo), after=first["next_after"])
    assert [r.run.run_id for r in second["rows"]] == [rid(n) for n in range(4, -1, -1)]
    assert second["next_after"] is None
    answer = list_runs_tool(ServerOptions(root=repo), ListRunsArgs(limit=3, agent="a"))
    assert [e["run_id"] for e in answer["entries"]] == [rid(54), rid(52), rid(50)]
    assert answer["next_after"] == rid(50)
    listed = Corral(repo).runs(limit=2)
    assert [r.run_id for r in listed] == [rid(54), rid(53)] and listed.next_after == rid(53)
    streamed = iter_entries(ledger, Filters(agent="b"))
    assert next(streamed).id == rid(53)  # the first before the rest are read


def test_the_index_is_rebuilt_exactly_after_delete_truncate_and_forgery(repo: Path) -> None:
    ledger = filled(repo)
    write_fanout(ledger, FanoutRecord(fanout_id="f-20261201-000100-abcdef", prompt="p",
                                      created_at=at(100)))
    page(ledger)
    exact = rows(ledger)
    shutil.rmtree(index_dir(ledger))
    assert [e.id for e in page(ledger).entries][:2] == ["f-20261201-000100-abcdef", rid(5)]
    assert rows(ledger) == exact
    db = index_dir(ledger) / "index.sqlite"
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 3)
    assert len(page(ledger).entries) == 7 and rows(ledger) == exact
    db.write_bytes(b"")
    assert len(page(ledger).entries) == 7 and rows(ledger) == exact
    db.write_bytes(b"not a database at all" * 100)
    assert len(page(ledger).entries) == 7 and rows(ledger) == exact
    # Forged: the newest run's row says another agent and a start after every run.
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET agent = 'forged', started = '2099-01-01' WHERE run_id = ?",
                 (rid(2),))
    conn.commit()
    conn.close()
    shown = find_run(ledger, "last")  # the forged row is picked, its record disagrees
    assert shown.run_id == rid(5) and shown.agent == "b"
    assert rows(ledger) == exact  # ... so the index was rebuilt
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET agent = 'forged' WHERE run_id = ?", (rid(2),))
    conn.commit()
    conn.close()
    assert find_run(ledger, rid(2)).agent == "a"  # show/diff/apply read the record
    code, _, err = corral("ledger", "reindex", "--root", str(repo))
    assert code == 0 and "6 run(s)" not in err and "7 run(s) and fanout(s)" in err
    assert rows(ledger) == exact


def test_files_changed_outside_corral_are_synced(repo: Path) -> None:
    ledger = filled(repo, 3)
    page(ledger)
    shutil.copytree(ledger / rid(1), ledger / "20261201-000050-abcdef")  # another writer
    copied = ledger / "20261201-000050-abcdef" / "record.json"
    copied.write_text(copied.read_text().replace(rid(1), "20261201-000050-abcdef")
                      .replace(at(1), at(50)))
    shutil.rmtree(ledger / rid(0))
    assert [e.id for e in page(ledger).entries] == ["20261201-000050-abcdef", rid(2), rid(1)]
    (ledger / rid(2) / "record.json").write_text("{truncated")
    rebuild(ledger)
    found = page(ledger)
    assert [e.id for e in found.entries] == ["20261201-000050-abcdef", rid(1)]
    assert [b.context["record"] for b in found.broken] == [
        str(ledger / rid(2) / "record.json")]


CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_ledger_index import record, at
    from executor.ledger import store
    from executor.ledger.rebuild import indexed
    ledger, step, run_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    if step == "in-refresh":
        store.write_run(ledger, record(run_id, at(9)), [])
        sys.exit(0)
    with indexed(ledger, run=run_id):
        if step == "after-record":
            store._write_run(ledger, record(run_id, at(9)), [], patch=None,
                             keep_transcript=False, preimages=None)
        elif step == "after-rewrite":
            store._replace_file(ledger / run_id / "record.json", store._json(
                record(run_id, at(9), state="discarded").model_dump(mode="json")).encode())
        os.kill(os.getpid(), signal.SIGKILL)
""")


def _child(ledger: Path, step: str, run_id: str) -> subprocess.Popen[bytes]:
    code = CHILD.format(tests=str(Path(__file__).parent))
    return subprocess.Popen([sys.executable, "-c", code, str(ledger), step, run_id],
                            cwd=REPO)


@pytest.mark.parametrize("step", ["before-record", "after-record", "after-rewrite",
                                  "in-refresh"])
def test_a_writer_killed_at_each_step_loses_nothing(repo: Path, step: str) -> None:
    ledger = filled(repo, 2)
    page(ledger)
    run_id = rid(1) if step == "after-rewrite" else rid(9)
    if step != "in-refresh":
        assert _child(ledger, step, run_id).wait() == -signal.SIGKILL
    else:
        blocker = sqlite3.connect(index_dir(ledger) / "index.sqlite", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the writer's index update waits on this
        child = _child(ledger, step, run_id)
        pending = index_dir(ledger) / "pending"
        while not ((ledger / run_id / "record.json").is_file()
                   and any(pending.iterdir())) and child.poll() is None:
            os.sched_yield()
        child.kill()
        child.wait()
        blocker.execute("ROLLBACK")
        blocker.close()
    assert any((index_dir(ledger) / "pending").iterdir())  # its marker stayed
    listed = {m.run_id: m for e in page(ledger).entries for _, m in e.members
              if not isinstance(m, str)}
    lost = step in ("before-record", "after-rewrite")  # no new run: none to list
    assert set(listed) == ({rid(0), rid(1)} if lost else {rid(0), rid(1), rid(9)})
    if step == "after-rewrite":
        assert listed[rid(1)].state == "discarded"
    assert not any((index_dir(ledger) / "pending").iterdir())  # repaired, markers gone


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_ledger_index import record, at
    from executor.ledger import write_run, set_run_state
    ledger, worker = Path(sys.argv[1]), int(sys.argv[2])
    for n in range(8):
        run_id = f"20261202-{{worker:03d}}{{n:03d}}-abcdef"
        write_run(ledger, record(run_id, at(worker * 100 + n), agent=f"w{{worker}}"), [])
        if n == 3:
            set_run_state(ledger, run_id, "discarded")
""")


def test_32_concurrent_writers_and_a_reader_lose_and_repeat_no_row(repo: Path) -> None:
    ledger = filled(repo, 1)
    page(ledger)
    code = WRITER.format(tests=str(Path(__file__).parent))
    writers = [subprocess.Popen([sys.executable, "-c", code, str(ledger), str(w)],
                                cwd=REPO) for w in range(32)]
    db = index_dir(ledger) / "index.sqlite"
    seen, reads = 0, 0
    while any(w.poll() is None for w in writers):  # a reader loop: never an error
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=scaled(0.5))
        count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        conn.close()
        assert count >= seen
        seen = count
        # ... and corral's own readers, which repair and sync as they read (writes too)
        listed = [(m.started_at, m.run_id) for e in page(ledger, limit=20).entries
                  for _, m in e.members if not isinstance(m, str)]
        assert len(listed) == len(set(listed)) and listed == sorted(listed, reverse=True)
        last = find_run(ledger, "last")  # read after: as new as the listing's newest
        assert (last.started_at, last.run_id) >= listed[0]
        reads += 1
    assert reads > 0
    assert [w.returncode for w in writers] == [0] * 32
    # Every writer's own index update went through: none left its marker to a reader.
    assert not any((index_dir(ledger) / "pending").iterdir())
    ids = [m.run_id for e in page(ledger).entries for _, m in e.members
           if not isinstance(m, str)]
    assert len(ids) == len(set(ids)) == 32 * 8 + 1
    discarded = page(ledger, Filters(state="discarded")).entries
    assert len(discarded) == 32


# -- every way a record changes keeps the index exact ---------------------------------

def exact_after(ledger: Path) -> list[tuple[object, ...]]:
    """The rows the writers left (read straight from the database: no reader repaired
    them), checked against a rebuild from the files alone; no marker left behind."""
    left = rows(ledger)
    assert not any((index_dir(ledger) / "pending").iterdir())
    shutil.rmtree(index_dir(ledger))
    rebuild(ledger)
    assert rows(ledger) == left
    return left


def test_every_mutation_leaves_the_rows_a_rebuild_makes(repo: Path, tmp_path: Path) -> None:
    ledger = filled(repo, 3)
    page(ledger)
    steps: dict[str, Callable[[], object]] = {
        "write": lambda: write_run(ledger, record(rid(10), at(10)), []),
        "rewrite whole": lambda: write_run(ledger, record(rid(10), at(10), agent="c"), [],
                                           keep_transcript=True),
        "applied": lambda: set_run_state(ledger, rid(0), "applied"),
        "discarded": lambda: discard_run(ledger, rid(1)),
        "check": lambda: set_run_check(ledger, rid(2), {"exit_code": 1}),
        "running": lambda: write_run(ledger, record(
            rid(11), at(11), status=RunStatus.RUNNING, owner={"host": "gone", "pid": 1}), []),
        "crashed": lambda: finalize_crashed(ledger, find_run(ledger, rid(11)),
                                            patch=b"", changed_files=[], note="died"),
        "fanout": lambda: write_fanout(ledger, FanoutRecord(
            fanout_id=FID, prompt="p", created_at=at(20), status="running",
            children=[FanoutChild(index=1, run_id=rid(21), agent="a")])),
        "fanout ends": lambda: write_fanout(ledger, find_fanout(ledger, FID).model_copy(
            update={"status": "completed"})),
        "followed": lambda: follow_run(
            ledger, run_id=rid(21), fanout=FID, source="n1", offset=0, lines=b"",
            record=record(rid(21), at(21), fanout=FID).model_dump_json().encode()),
        "landed": lambda: land_run(ledger, packed(tmp_path, rid(21), fanout=FID),
                                   run_id=rid(21), fanout=FID),
        "deleted": lambda: delete_run(ledger, rid(10)),
    }
    seen = {}
    for name, step in steps.items():
        step()
        seen[name] = exact_after(ledger)
    listed = {r[0]: r for r in seen["deleted"] if str(r[0]).startswith("2026")}
    assert rid(10) not in listed and not (ledger / rid(10)).exists()
    assert listed[rid(0)][5] == "applied" and listed[rid(1)][5] == "discarded"
    assert listed[rid(2)][RUN_COLUMNS.index("check_outcome")] == "failed"
    assert listed[rid(11)][4] == "crashed" and listed[rid(21)][4] == "completed"
    assert rid(10) in {r[0] for r in seen["rewrite whole"]}
    assert not delete_run(ledger, rid(10))  # nothing there: nothing done
    for wrong in ("../elsewhere", "fanouts"):
        with pytest.raises(ExecutorError, match=r"invalid run id|not a run"):
            delete_run(ledger, wrong)
    assert (ledger / "fanouts" / f"{FID}.json").is_file()


FID = "f-20261201-000020-abcdef"


def packed(tmp_path: Path, run_id: str, *, fanout: str) -> dict[str, object]:
    """Run ``run_id`` as a node recorded it and handed it back (:func:`pack_run`)."""
    node = tmp_path / "node-ledger"
    write_run(node, record(run_id, at(21), fanout=fanout), [])
    return pack_run(node, run_id)


class OneNode:
    """A scheduler whose jobs run as on one cluster node: the node's own code
    (``remote.there`` at one ``place``, its own ledger there), then ``land`` here."""

    def __init__(self, jobs: int, deadline: Deadline, cancellation: Cancellation,
                 place: Path) -> None:
        self.local = LocalScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation)
        self.place = place

    @property
    def deadline(self) -> Deadline:
        return self.local.deadline

    @property
    def cancellation(self) -> Cancellation:
        return self.local.cancellation

    def submit(self, job: Job[Any], *, report: Callable[[Any], None] | None = None
               ) -> Handle[Any]:
        remote = job.remote
        assert remote is not None, "a fanout child always has its remote form"
        cargo = remote.cargo()

        def run(context: JobContext) -> Any:
            there = JobContext(key=context.key, deadline=context.deadline,
                               cancellation=context.cancellation,
                               report=remote.relayed)
            return remote.land(remote.there(there, cargo, self.place), ["ran on one node"])

        return self.local.submit(Job(key=job.key, run=run), report=report)

    def as_completed(self, handles: Iterable[Handle[Any]]) -> Iterator[Handle[Any]]:
        return self.local.as_completed(handles)

    def cancel(self, reason: str) -> None:
        self.local.cancel(reason)

    def close(self) -> None:
        self.local.close()


def test_a_node_removes_the_run_it_handed_back_from_its_index_too(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".ngn" / "agents").mkdir(parents=True)
    (project / ".ngn" / "agents" / "w.md").write_text(
        "---\nname: w\ndescription: writes\ntools: [write_file]\n---\nDo the task.\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c",
                                                   "user.email=t@example.invalid",
                                                   "commit", "-qm", "start"]):
        subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)
    quick = tmp_path / "q.json"
    quick.write_text(json.dumps([{"tool_calls": [{"name": "write_file", "arguments": {
        "path": "x.txt", "content": "x\n"}}]}, {"text": "x"}]))
    place = tmp_path / "node"
    corral = Corral(project, trust_project=True, personal=False, backend="host")
    result = corral.fanout("go", agents=["w"], scripts=[str(quick)], n=2, jobs=2,
                           scheduler=lambda j, d, c: OneNode(j, d, c, place), on="ray")
    assert result.exit_code == 0, result
    node = place / "ledger"
    assert index_dir(node).is_dir()  # the node's own ledger had an index ...
    assert not [p for p in node.iterdir() if p.name != "fanouts"]  # its copies are gone
    assert exact_after(node) == []  # ... that holds no row for them: no reader repaired it
    here = ledger_dir(project)
    assert {r[0] for r in exact_after(here)} >= {c.run_id for c in result.children}
    # A forged row never changes what apply reads: `last` by a start time the record does
    # not hold is checked against the record (the index rebuilt), and the diff applied is
    # the one the record's digest names.
    older, newer = sorted((c.run.record for c in result.children if c.run),
                          key=lambda r: (r.started_at, r.run_id))
    conn = sqlite3.connect(index_dir(here) / "index.sqlite")
    conn.execute("UPDATE runs SET started = '2099-01-01', files = 9 WHERE run_id = ?",
                 (older.run_id,))
    conn.commit()
    conn.close()
    report = corral.apply("last", yes=True)
    assert report.run_id == newer.run_id and (project / "x.txt").read_text() == "x\n"
    assert find_run(here, newer.run_id).state == "applied"
    assert find_run(here, older.run_id).state == "pending"

"""``corral gc`` and a sandbox it cannot stop, for real (issue 33): nothing monkeypatched.

A docker sandbox is opened through an engine address of its own (a socket this test
forwards to the real engine, as a remote ``DOCKER_HOST`` would be), then the owner is
killed and the address cut off: the engine never hears the owner's connections close (a
partition: no FIN arrives), so the container's lifeline holds and the container runs on.
With the address down, gc cannot remove it: the sandbox is kept and reported, and stays
whole (its container, its worktree, no diff taken while it may still run), whatever else gc
does in the same pass (its sweep of containers that belong to no kept or live sandbox runs
on the real engine, which does answer) while a stale sandbox beside it is cleaned. With the
address up again, the next gc cleans it and keeps its diff.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import backend_config

from sandbox.gc import gc
from tests.backends import require_backend

ENGINE = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").removeprefix("unix://")
pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

_CRASH = """
import os, signal, sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import DockerConfig
from sandbox.factory import open_sandbox
config = DockerConfig.model_validate_json(sys.argv[1])
sb = open_sandbox(config, repo=Path(sys.argv[2]), mode=SandboxMode.WORKTREE,
                  state_root=Path(sys.argv[3]), workspace="worktree")
sb.files.write_text("crash.txt", "written before the crash\\n")
print(sb.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


class Forwarder:
    """A unix socket that forwards every connection to the docker engine's. A client's end
    of a connection is never passed on (the engine sees a partition, not a close)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conns: list[socket.socket] = []
        self.listener: socket.socket | None = None

    def open(self) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(16)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(ENGINE)
            self.conns += [client, engine]
            for a, b, ends in ((client, engine, False), (engine, client, True)):
                threading.Thread(target=self._pump, args=(a, b, ends), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, ends: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                sink.sendall(data)
        if ends:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        """The address stops answering: no new connection (open ones hang on)."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        self.cut()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.close()
        self.conns = []


@pytest.fixture
def forwarder(tmp_path: Path) -> Iterator[Forwarder]:
    require_backend("docker")
    if not Path(ENGINE).is_socket():
        pytest.skip(f"the docker engine is not at a unix socket here ({ENGINE})")
    made = Forwarder(tmp_path / "engine.sock")
    made.open()
    try:
        yield made
    finally:
        made.close()


def _crashed(repo: Path, state_root: Path, base_url: str | None) -> str:
    extra = {"base_url": base_url} if base_url else {}
    config = backend_config("docker", **extra)
    done = subprocess.run([sys.executable, "-c", _CRASH, config.model_dump_json(), str(repo),
                           str(state_root)], capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    return done.stdout.strip()


def _container_exists(name: str) -> bool:
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^/{name}$"],
                            capture_output=True, text=True, check=True)
    return bool(listed.stdout.strip())


def test_a_sandbox_gc_cannot_stop_stays_whole_and_a_stale_one_beside_it_goes(
        forwarder: Forwarder, repo: Path, state_root: Path) -> None:
    stuck = _crashed(repo, state_root, f"unix://{forwarder.path}")
    stale = _crashed(repo, state_root, None)
    forwarder.cut()
    try:
        report = gc(state_root)
        [kept] = report.by_action("kept")
        assert kept.sandbox_id == stuck and "not stopped" in kept.detail, report
        assert [e.sandbox_id for e in report.by_action("cleaned")] == [stale]
        assert not report.by_action("orphan_removed"), report
        assert _container_exists(stuck)  # never removed as an orphan: it may still run
        assert not _container_exists(stale)
        assert (state_root / "worktrees" / stuck / "crash.txt").is_file()
        assert (state_root / "sandboxes" / stuck).is_dir()
        assert not (state_root / "results" / stuck).exists()  # not diffed while it may run
        assert b"crash.txt" in (state_root / "results" / stale / "diff.patch").read_bytes()
    finally:
        forwarder.open()
    report = gc(state_root)
    [cleaned] = report.by_action("cleaned")
    assert cleaned.sandbox_id == stuck and not _container_exists(stuck)
    changed = json.loads((state_root / "results" / stuck / "diff.json").read_text())
    assert [c["path"] for c in changed["changed"]] == ["crash.txt"]
    assert not (state_root / "sandboxes" / stuck).exists()
    assert not gc(state_root).entries

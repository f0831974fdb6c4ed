"""Jobs for a real Ray scheduler whose ``there`` waits on files a test creates (every node
of a local test cluster shares this machine's filesystem), imported by name on the nodes
(``tests.ray_jobs``: the repository root is on the workers' ``PYTHONPATH``)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from executor.scheduling.base import JobContext

#: How long a held job waits for its release before it gives up (a test that failed).
HOLD = 300.0


class FileJob:
    """A :class:`~executor.scheduling.base.Remote`. ``hold``: mark itself running (under
    ``root/running``), note how many were running then (``root/seen/<key>``), wait for
    ``root/release/<key>``, unmark, return its key. ``die``: note the attempt
    (``root/attempts/<key>.<n>``) and end its worker process at once, as a lost node does."""

    def __init__(self, root: Path, key: str, mode: str) -> None:
        self.root, self.key, self.mode = str(root), key, mode

    def cargo_key(self) -> str:
        return "files"

    def cargo(self) -> bytes:
        return b""

    def there(self, context: JobContext, cargo: bytes, place: Path) -> Any:
        root = Path(self.root)
        if self.mode == "die":
            (root / "attempts" / f"{self.key}.{uuid.uuid4().hex}").touch()
            os._exit(1)
        running = root / "running" / self.key
        running.touch()
        (root / "seen" / self.key).write_text(str(len(list((root / "running").iterdir()))))
        deadline = time.monotonic() + HOLD
        while not (root / "release" / self.key).exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # the test's release is a file: nothing to wait on but it
        running.unlink()
        return self.key

    def relayed(self, event: Any) -> Any:
        return event

    def land(self, returned: Any, notes: list[str]) -> Any:
        return returned


def never_here(context: JobContext) -> Any:
    raise AssertionError("a job with a remote ran in the driver")

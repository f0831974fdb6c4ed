"""A sandbox's pids cgroup is made even when its group goes at that moment (issue 36).

The sandboxes of one state root share a group, ``corral/<group>/``, which the last of
them removes as it ends. Two processes on one state root (a Ray node's workers) race: one
made the group and was about to make its own cgroup in it when the other, ending its last
sandbox, removed the group. The sandbox then did not open (``No such file or directory``)
and a fanout's check of a good candidate was lost: the empty check output CI saw on Ray.
The window is forced here: the group is taken away right after it is made.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from sandbox.backends.limits import PidsCgroup, find_pids_hierarchy


def test_a_group_removed_between_its_making_and_the_sandbox_s_is_made_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if find_pids_hierarchy() is None:
        pytest.skip("no writable pids cgroup hierarchy on this machine")
    group = f"test-{secrets.token_hex(4)}"
    real_mkdir = Path.mkdir
    taken: list[Path] = []

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        real_mkdir(self, *args, **kwargs)
        if self.name == group and not taken:  # another process's last sandbox ends now
            self.rmdir()
            taken.append(self)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    cgroup = PidsCgroup.create(group, f"sbx-{secrets.token_hex(4)}", 16)
    monkeypatch.undo()
    assert cgroup is not None and taken
    try:
        assert cgroup.path.is_dir() and (cgroup.path / "pids.max").read_text().strip() == "16"
    finally:
        cgroup.remove()
    assert not cgroup.path.parent.exists()  # the last one out removes the group still

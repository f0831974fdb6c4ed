"""The backup an apply takes before it writes (``executor/apply/backup.py``) is a true copy,
and on disk.

A restore is only as good as the backup it reads: a copy that differs from what it
copied (a short or corrupted write, a file rewritten while it was being saved) would
put wrong bytes back into the user's checkout, and a copy, manifest or directory entry
still in the page cache when the machine loses power is gone when ``corral apply
--recover`` needs it. So each copy is read back and compared with the digest of what
was saved, before anything is written, and every copy, the manifest and both
directories are fsynced before git writes the checkout. A power loss cannot be
simulated here: ``os.fsync`` is observed in-process instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from apply_support import checkout_digest, record_patch
from exec_support import git

from executor.apply import ApplyFailed, ApplyOptions, apply_run
from executor.apply import backup as merge_backup
from executor.apply import steps as merge_steps
from executor.ledger import ledger_dir


def _patched_run(repo: Path) -> str:
    """A run whose diff edits two files and adds one (its record, in the repo's ledger)."""
    (repo / "README.md").write_text("# Project\n\nhello, changed\n")
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    (repo / "src" / "new.py").write_text("NEW = 1\n")
    git(repo, "add", "-N", "src/new.py")
    patch = git(repo, "diff").encode()
    git(repo, "reset", "-q")
    git(repo, "checkout", "-q", "--", ".")
    (repo / "src" / "new.py").unlink()
    return record_patch(repo, patch)


def _apply(repo: Path, run_id: str) -> None:
    apply_run(repo, ledger_dir(repo), run_id, ApplyOptions(), confirm=lambda plan: True)


def _is_backup_copy(path: Path) -> bool:
    """``<backup parent>/apply-<token>/files/<n>``: a copy the backup keeps."""
    return path.parent.name == "files" and path.parent.parent.name.startswith("apply-")


def test_a_backup_copy_that_differs_from_the_file_stops_the_apply(
    repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy of ``README.md`` comes out with one byte changed. Unverified, the apply goes
    ahead with a backup that would restore the wrong bytes; verified, it refuses before
    writing anything."""
    run_id = _patched_run(repo)
    before = checkout_digest(repo)
    real_copy = shutil.copyfile
    corrupted: list[Path] = []
    faulty = [True]

    def corrupting(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                   follow_symlinks: bool = True) -> str | os.PathLike[str]:
        done = real_copy(src, dst, follow_symlinks=follow_symlinks)
        target = Path(dst)
        if faulty[0] and _is_backup_copy(target) and Path(src).name == "README.md":
            data = bytearray(target.read_bytes())
            data[0] ^= 0x20
            target.write_bytes(bytes(data))
            corrupted.append(target)
        return done

    monkeypatch.setattr(merge_backup.shutil, "copyfile", corrupting)
    with pytest.raises(ApplyFailed) as raised:
        _apply(repo, run_id)
    assert corrupted, "the backup never copied README.md"
    assert "could not save a backup" in raised.value.message
    assert "README.md changed while it was saved" in raised.value.message
    assert checkout_digest(repo) == before  # nothing was written
    faulty[0] = False
    _apply(repo, run_id)  # and with a faithful copy the same apply goes through
    assert (repo / "README.md").read_text() == "# Project\n\nhello, changed\n"


def test_every_backup_copy_the_manifest_and_their_directories_are_synced_before_git_writes(
    repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = _patched_run(repo)
    real_fsync = os.fsync
    synced: list[Path] = []
    at_write: list[Path] = []

    def observed_fsync(fd: int) -> None:
        synced.append(Path(f"/proc/self/fd/{fd}").readlink())
        real_fsync(fd)

    def mark(name: str) -> None:
        if name == "git apply":  # git is about to write the checkout
            at_write[:] = list(synced)

    monkeypatch.setattr(merge_backup.os, "fsync", observed_fsync)
    monkeypatch.setattr(merge_steps, "fault_hook", mark)
    _apply(repo, run_id)
    [backup] = (ledger_dir(repo) / run_id / "apply-backup").glob("apply-*")
    copies = sorted((backup / "files").iterdir())
    assert len(copies) == 2  # README.md and src/app.py: new.py did not exist
    missing = [path for path in copies if path not in at_write]
    assert not missing, f"backup copies not fsynced before git wrote: {missing}"
    assert backup / "files" in at_write, "the copies' directory was not fsynced"
    assert any(path.parent == backup and path.name.startswith(".manifest-")
               for path in at_write), "the manifest was not fsynced"
    assert backup in at_write, "the manifest's rename was not fsynced"

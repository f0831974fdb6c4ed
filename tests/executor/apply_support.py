"""Helpers for the apply tests: the CLI's real exit codes, whole-checkout digests, records."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from executor.cli import main
from executor.ledger import RunRecord, RunStatus, ledger_dir, new_run_id, write_run


def corral(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the real CLI entry point (its error renderer and exit codes); (code, output)."""
    code: Any = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return int(code or 0), captured.out + captured.err


def checkout_digest(repo: Path, *, outside: Path | None = None) -> str:
    """Every byte of the checkout: working tree (tracked, untracked and ignored files,
    modes, symlink targets, empty directories), and all of ``.git`` (index, refs, objects,
    config); plus ``outside`` when given."""
    digest = hashlib.sha256()
    for base in [repo] + ([outside] if outside is not None else []):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                info = path.lstat()
                digest.update(f"{path.relative_to(base)}\0{info.st_mode}\0".encode())
                if path.is_symlink():
                    digest.update(str(path.readlink()).encode())
                elif path.is_file():
                    digest.update(path.read_bytes())
    return digest.hexdigest()


def record_patch(repo: Path, patch: bytes, **fields: Any) -> str:
    """Write a run record whose diff is ``patch``; its id."""
    run_id = new_run_id()
    write_run(ledger_dir(repo), RunRecord(
        run_id=run_id, agent="a", agent_format="ngn", agent_source="a.md",
        contract_digest="d", prompt="p", backend="host", mode="worktree",
        status=RunStatus.COMPLETED, diff=patch.decode("utf-8", "replace"), **fields),
        [], patch=patch)
    return run_id


def call(name: str, **arguments: object) -> dict[str, object]:
    """One scripted tool call."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}

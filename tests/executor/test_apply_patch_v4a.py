"""apply_patch takes the V4A format too (issue 31): GPT-family models write
``*** Begin Patch`` patches, which were refused as "no file changes found".

The same change is made once from a unified diff that real ``git diff`` wrote and once
from a V4A patch, and both give the same bytes. The V4A paths go through the same
confinement as every other write (``..``, ``.git``, absolute paths, a move onto ``.git``),
and a patch that fails anywhere writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.tools import ToolContext, native_tools
from executor.tools.dispatch import ToolFailure
from policies.contract import SandboxMode
from sandbox.config import HostConfig, Limits
from sandbox.factory import open_sandbox
from tests.backends import git

TOOL = native_tools()["apply_patch"]

APP = '''import sys


class Greeter:
    def greet(self, name):
        return "hello " + name

    def leave(self, name):
        return "bye " + name


def main():
    print(Greeter().greet(sys.argv[1]))
'''

CHANGED = APP.replace('"hello " + name', 'f"hello, {name}!"').replace(
    "    print(Greeter().greet(sys.argv[1]))\n",
    "    print(Greeter().greet(sys.argv[1]))\n    return 0\n")

#: What a GPT model writes for that change: a chunk found under its @@ line, and one
#: that ends the file.
V4A = '''*** Begin Patch
*** Update File: app.py
@@ class Greeter:
     def greet(self, name):
-        return "hello " + name
+        return f"hello, {name}!"
@@ def main():
     print(Greeter().greet(sys.argv[1]))
+    return 0
*** End of File
*** Add File: docs/NOTES.md
+# Notes
+
+greet() now punctuates.
*** End Patch
'''


@pytest.fixture
def ctx(repo: Path, tmp_path: Path) -> Iterator[ToolContext]:
    (repo / "app.py").write_text(APP)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "app")
    sandbox = open_sandbox(HostConfig(limits=Limits(timeout_seconds=20)), repo=repo,
                           mode=SandboxMode.WORKTREE, state_root=tmp_path / "state")
    try:
        yield ToolContext(sandbox=sandbox, agent="t")
    finally:
        sandbox.teardown(discard=True)


def apply(ctx: ToolContext, patch: str) -> str:
    return TOOL.run(TOOL.args.model_validate({"patch": patch}), ctx).content


def _git_diff_of(repo: Path, tmp_path: Path) -> str:
    """The unified diff real git writes for APP -> CHANGED."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    (other / "app.py").write_text(CHANGED)
    return git(other, "diff").stdout


def test_a_v4a_patch_and_real_gits_diff_make_the_same_bytes(
        ctx: ToolContext, repo: Path, tmp_path: Path) -> None:
    files = ctx.sandbox.files
    assert apply(ctx, V4A) == "patched app.py, created docs/NOTES.md"
    assert files.read_text("app.py") == CHANGED
    assert files.read_text("docs/NOTES.md") == "# Notes\n\ngreet() now punctuates.\n"
    files.write_text("app.py", APP)
    assert apply(ctx, _git_diff_of(repo, tmp_path)) == "patched app.py"
    assert files.read_text("app.py") == CHANGED


def test_moves_deletes_and_trailing_whitespace_the_format_tolerates(ctx: ToolContext) -> None:
    files = ctx.sandbox.files
    files.write_text("old.txt", "keep  \nchange\n")
    out = apply(ctx, "*** Begin Patch\n*** Update File: old.txt\n*** Move to: new/moved.txt\n"
                "@@\n keep\n-change\n+changed\n*** Delete File: app.py\n*** End Patch")
    assert out == "created new/moved.txt, deleted old.txt, deleted app.py"
    assert files.read_text("new/moved.txt") == "keep\nchanged\n"
    assert not files.exists("old.txt") and not files.exists("app.py")


@pytest.mark.parametrize("patch", [
    "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch",
    "*** Begin Patch\n*** Add File: /etc/cron.d/x\n+x\n*** End Patch",
    "*** Begin Patch\n*** Add File: .git/hooks/post-commit\n+x\n*** End Patch",
    "*** Begin Patch\n*** Update File: app.py\n*** Move to: .git/config\n@@\n import sys\n"
    "*** End Patch",
    "*** Begin Patch\n*** Update File: app.py\n*** Move to: ../../x.py\n@@\n import sys\n"
    "*** End Patch",
    "*** Begin Patch\n*** Delete File: .git/HEAD\n*** End Patch",
    "*** Begin Patch\n*** Add File: app.py\n+x\n*** End Patch",  # exists
    "*** Begin Patch\n*** Update File: app.py\n@@ class Nowhere:\n-x\n+y\n*** End Patch",
    "*** Begin Patch\n*** Update File: app.py\n@@\n-not in the file\n+y\n*** End Patch",
    "*** Begin Patch\n*** Add File: x.txt\nno plus\n*** End Patch",
    "*** Begin Patch\n*** Update File: app.py\n@@\n import sys\n",  # no End Patch
    "*** Begin Patch\n*** Frobnicate File: app.py\n*** End Patch",
])
def test_hostile_or_broken_v4a_patches_write_nothing(ctx: ToolContext, repo: Path,
                                                     patch: str) -> None:
    files = ctx.sandbox.files
    before = files.read_text("app.py")
    with pytest.raises(ToolFailure):
        apply(ctx, patch)
    assert files.read_text("app.py") == before
    assert not (repo.parent / "escape.txt").exists()
    assert not files.exists("x.txt")


def test_a_failing_second_file_keeps_the_first_unwritten(ctx: ToolContext) -> None:
    files = ctx.sandbox.files
    with pytest.raises(ToolFailure, match="chunk 1 does not apply"):
        apply(ctx, "*** Begin Patch\n*** Add File: first.txt\n+one\n*** Update File: app.py\n"
              "@@\n-no such line\n+x\n*** End Patch")
    assert not files.exists("first.txt")


def test_every_path_of_a_move_is_a_subject_of_the_rules() -> None:
    args = TOOL.args.model_validate({"patch": "*** Begin Patch\n*** Update File: src/a.py\n"
                                     "*** Move to: secrets/a.py\n@@\n x\n*** End Patch"})
    assert TOOL.subjects(args) == ["src/a.py", "secrets/a.py"]

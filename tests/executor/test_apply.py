"""Merging a child's diff (threats B3): validated headers, explicit review, all or nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from exec_support import git

from executor.apply import MergeRefused, apply_to_checkout, inspect_patch
from executor.cli import cli
from executor.ledger import RunRecord, RunStatus, ledger_dir, new_run_id, write_run


def new_file(path: str, body: str = "x\n", mode: str = "100644") -> str:
    lines = body.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n"
            + "".join(f"+{line}\n" for line in lines))


def problems(patch: str, **options: bool) -> list[str]:
    return inspect_patch(patch, **options).problems


def test_apply_rejects_parent_traversal() -> None:
    assert problems(new_file("../outside.txt")) == [
        "path ../outside.txt leaves the repository ('..')"]


def test_apply_rejects_absolute_paths() -> None:
    patch = "diff --git a//etc/x b//etc/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/x\n"
    assert problems(patch) == ["absolute path /etc/x"]


def test_apply_rejects_rename_target_outside() -> None:
    patch = ("diff --git a/a.txt b/a.txt\nsimilarity index 100%\nrename from a.txt\n"
             "rename to ../../a.txt\n")
    assert problems(patch) == ["path ../../a.txt leaves the repository ('..')"]


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".GIT/hooks/pre-commit",
                                  "sub/.git/config", ".git./config", "git~1/config",
                                  ".g\u200cit/config"])
def test_apply_rejects_dot_git_variants(path: str) -> None:
    assert problems(new_file(path)) == [f"path {path} is inside a .git directory"]


def test_patch_symlink_mode_rejected_by_policy() -> None:
    link = new_file("lnk", "/etc/passwd", mode="120000")
    assert problems(link) == ["lnk: creates a symlink (pass --allow-symlinks to merge symlinks)"]
    assert problems(link, allow_symlinks=True) == []


def test_apply_beyond_symlink_rejected() -> None:
    patch = new_file("lnk", "/tmp", mode="120000") + new_file("lnk/x")
    assert problems(patch, allow_symlinks=True) == [
        "lnk/x: lies beyond a symlink the patch creates"]


def test_patch_with_gitlink_rejected() -> None:
    patch = ("diff --git a/vendor/x b/vendor/x\nnew file mode 160000\nindex 0000000..abc\n"
             "--- /dev/null\n+++ b/vendor/x\n@@ -0,0 +1 @@\n+Subproject commit abc\n")
    assert problems(patch) == ["vendor/x: gitlinks (submodules) are never merged"]


def _git_patch(tmp_path: Path, files: dict[str, bytes]) -> bytes:
    """A real ``git diff --binary`` adding ``files`` (symlinks when the value starts @)."""
    work = tmp_path / "patchsrc"
    work.mkdir()
    git(work, "init", "-q")
    for name, content in files.items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith(b"@"):
            target.symlink_to(content[1:].decode())
        else:
            target.write_bytes(content)
    git(work, "add", "-A")
    return subprocess.run(["git", "diff", "--cached", "--binary"], cwd=work,
                          capture_output=True, check=True).stdout


def test_patch_with_binary_blob_requires_opt_in(tmp_path: Path) -> None:
    patch = _git_patch(tmp_path, {"b.bin": bytes(range(256))})
    assert problems(patch) == ["b.bin: binary change (pass --allow-binary)"]
    assert problems(patch, allow_binary=True) == []


def test_names_with_spaces_are_read_exactly(tmp_path: Path) -> None:
    """A header git does not quote (spaces) is still read; the symlink and the second
    file are both seen (the review's bypass: a symlink hidden by a name with a space)."""
    patch = _git_patch(tmp_path, {"link": b"@/root/.bashrc", "z z.txt": b"x",
                                  "dir with space/a b.md": b"y\n"})
    plan = inspect_patch(patch)
    assert sorted(f.path for f in plan.files) == ["dir with space/a b.md", "link", "z z.txt"]
    assert [f.path for f in plan.files if f.new_mode == "120000"] == ["link"]
    assert plan.problems == ["link: creates a symlink (pass --allow-symlinks to merge symlinks)"]
    assert inspect_patch(patch, allow_symlinks=True).problems == []


def test_quoted_names_are_decoded_and_judged(tmp_path: Path) -> None:
    """git quotes non-ASCII and control characters: those names are decoded, merged when
    harmless, and still refused when they spell .git."""
    patch = _git_patch(tmp_path, {"café/naïve.md": b"x\n", "tab\tname": b"y\n"})
    plan = inspect_patch(patch)
    assert sorted(f.path for f in plan.files) == ["café/naïve.md", "tab\tname"]
    # the tab, not the accent (git's own reading of the tab path is refused as well)
    assert plan.problems[0] == "path 'tab\\tname' contains control characters"
    assert not any("café" in p for p in plan.problems)
    hidden = ('diff --git "a/.g\\342\\200\\214it/config" "b/.g\\342\\200\\214it/config"\n'
              'new file mode 100644\n--- /dev/null\n+++ "b/.g\\342\\200\\214it/config"\n'
              '@@ -0,0 +1 @@\n+x\n')
    assert problems(hidden) == ["path .g\u200cit/config is inside a .git directory"]


def test_a_header_this_check_cannot_read_is_refused() -> None:
    patch = ('diff --git "a/x\\q" "b/x\\q"\nnew file mode 100644\n'
             '--- /dev/null\n+++ "b/x\\q"\n@@ -0,0 +1 @@\n+x\n')
    assert problems(patch)[:2] == ['malformed quoted path "a/x\\q"',
                                   'malformed quoted path "b/x\\q"']


def test_patch_over_byte_cap_refused() -> None:
    assert inspect_patch(new_file("a.txt", "x" * 100), max_bytes=50).problems == [
        "the patch is 215 bytes; the limit is 50"]


def test_merge_summary_lists_mode_changes_and_risky_paths() -> None:
    patch = ("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
             + new_file(".github/workflows/ci.yml") + new_file(".claude/settings.json")
             + new_file("Makefile") + new_file("src/ok.py"))
    plan = inspect_patch(patch)
    flags = {f.path: f.flags for f in plan.files}
    assert "mode_change" in flags["run.sh"] and "executable" in flags["run.sh"]
    assert "ci_config" in flags[".github/workflows/ci.yml"]
    assert "agent_config" in flags[".claude/settings.json"]
    assert "build_script" in flags["Makefile"]
    assert flags["src/ok.py"] == ()
    assert [f.path for f in plan.flagged] == ["run.sh", ".github/workflows/ci.yml",
                                              ".claude/settings.json", "Makefile"]


def test_failed_apply_leaves_parent_tree_unchanged(repo: Path) -> None:
    good = new_file("new.txt")
    bad = ("diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
           "@@ -1 +1 @@\n-# Not the first line\n+# X\n")
    with pytest.raises(MergeRefused, match="does not apply"):
        apply_to_checkout(repo, good + bad)
    assert not (repo / "new.txt").exists()
    assert git(repo, "status", "--porcelain") == ""
    apply_to_checkout(repo, good)
    assert (repo / "new.txt").read_text() == "x\n"


def test_apply_refuses_a_repository_whose_config_runs_programs(repo: Path) -> None:
    git(repo, "config", "filter.evil.smudge", "touch /tmp/corral-pwned")
    with pytest.raises(MergeRefused):
        apply_to_checkout(repo, new_file(".gitattributes", "* filter=evil"))
    assert not (repo / ".gitattributes").exists()


def _record(repo: Path, diff: str) -> str:
    run_id = new_run_id()
    write_run(ledger_dir(repo), RunRecord(
        run_id=run_id, agent="a", agent_format="ngn", agent_source="a.md",
        contract_digest="d", prompt="p", backend="host", mode="worktree",
        status=RunStatus.COMPLETED, diff=diff), [])
    return run_id


def test_patch_touching_agent_config_requires_explicit_approval(repo: Path) -> None:
    """threats B2.15: a change to agent or CI config is merged only with --yes."""
    run_id = _record(repo, new_file(".claude/settings.json", "{}"))
    refused = CliRunner().invoke(cli, ["apply", run_id, "--root", str(repo)])
    assert refused.exit_code != 0 and not (repo / ".claude/settings.json").exists()
    assert "flagged for review" in str(refused.exception)
    done = CliRunner().invoke(cli, ["apply", run_id, "--root", str(repo), "--yes"])
    assert done.exit_code == 0, done.output
    assert (repo / ".claude/settings.json").read_text() == "{}\n"


def test_apply_command_end_to_end(repo: Path) -> None:
    run_id = _record(repo, new_file("docs/note.md", "hello"))
    checked = CliRunner().invoke(cli, ["apply", run_id, "--root", str(repo), "--check"])
    assert checked.exit_code == 0 and not (repo / "docs/note.md").exists()
    done = CliRunner().invoke(cli, ["apply", run_id[:12], "--root", str(repo)])
    assert done.exit_code == 0 and (repo / "docs/note.md").read_text() == "hello\n"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout
    assert "docs/" in status

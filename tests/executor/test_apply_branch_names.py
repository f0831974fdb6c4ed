"""``corral apply RUN --branch NAME`` refuses a name git would read as another ref (issue 28).

``HEAD``, ``@``, ``origin/main`` (a branch shadowing a remote-tracking ref),
``refs/heads/main`` (which became ``refs/heads/refs/heads/main``) were accepted: a later
``git checkout NAME`` or ``git merge NAME`` then takes the other ref, not the run's
commit. Names are checked with git's own ``check-ref-format --branch`` and against the
refs git's dwim would find first; the table runs on a real repository with a tag, a
remote-tracking branch and a previous branch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from exec_support import agent_file, git
from test_apply_branch import _run, _state, _write, entry

from executor.apply.branch import check_branch_name
from executor.apply.errors import MergeRefused


@pytest.fixture
def refs(repo: Path) -> Path:
    """``repo`` with a tag, origin's main (and origin/HEAD), a previous branch."""
    git(repo, "tag", "v1")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    git(repo, "update-ref", "refs/notes/commits", "HEAD")
    git(repo, "checkout", "-q", "-b", "previous")
    git(repo, "checkout", "-q", "-")
    return repo


def _current(repo: Path) -> str:
    return git(repo, "symbolic-ref", "--short", "HEAD").strip()


#: A name -> why it is refused (a part of the message).
AMBIGUOUS = {
    "HEAD": "not a valid branch name",
    "@": "git reads it as HEAD",
    "ORIG_HEAD": "git reads it as HEAD or one of its own refs",
    "FETCH_HEAD": "git reads it as HEAD or one of its own refs",
    "origin/main": "refs/remotes/origin/main exists",
    "origin": "refs/remotes/origin/HEAD exists",
    "refs/heads/main": "it names a full ref; the branch would be refs/heads/refs/heads/main",
    "refs/x": "it names a full ref",
    "v1": "refs/tags/v1 exists",
    "tags/v1": "refs/tags/v1 exists",
    "notes/commits": "refs/notes/commits exists",
    "remotes/origin/main": "refs/remotes/origin/main exists",
    "@{-1}": "git reads it as branch 'previous'",
    "a" * 40: "spelled like an object id",
    "bad..name": "not a valid branch name",
    "-x": "not a valid branch name",
    "x.lock": "not a valid branch name",
    "": "not a valid branch name",
}


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_a_name_git_reads_as_another_ref_is_refused(refs: Path, name: str) -> None:
    with pytest.raises(MergeRefused) as caught:
        check_branch_name(name, refs / ".git")
    assert caught.value.code == "bad_branch"
    assert repr(name) in caught.value.message and AMBIGUOUS[name] in caught.value.message
    assert caught.value.hint


def test_names_git_resolves_otherwise_are_refused(refs: Path) -> None:
    """``heads/<current>`` is the current branch by dwim; an abbreviated commit id is that
    commit."""
    for name in (f"heads/{_current(refs)}", git(refs, "rev-parse", "--short=10", "HEAD")
                 .strip()):
        with pytest.raises(MergeRefused, match="ambiguous"):
            check_branch_name(name, refs / ".git")


def test_plain_new_names_are_accepted(refs: Path) -> None:
    for name in ("corral/notes", "main-2", "fix", "origin-main", "v2", "feature/x.y"):
        assert check_branch_name(name, refs / ".git") == f"refs/heads/{name}"
    with pytest.raises(MergeRefused, match="already exists") as caught:
        check_branch_name(_current(refs), refs / ".git")
    assert caught.value.code == "branch_exists"


def test_the_cli_refuses_a_shadowing_name_says_why_and_changes_nothing(
        refs: Path, tmp_path: Path) -> None:
    agent_file(refs, "w", "tools: [write_file]")
    git(refs, "add", "-A")
    git(refs, "commit", "-qm", "agent")
    ran = _run(refs, tmp_path, [_write("notes.md", "# Notes\n"), {"text": "done"}])
    before = _state(refs)
    for name in ("origin/main", "refs/heads/main", "@"):
        code, _, err = entry("apply", ran["run_id"], "--root", str(refs), f"--branch={name}")
        assert code == 4, err
        assert f"branch name {name!r} is ambiguous" in err and "corral/<name>" in err, err
        assert _state(refs) == before
    code, _, err = entry("apply", ran["run_id"], "--root", str(refs), "--branch=corral/notes")
    assert code == 0, err
    assert git(refs, "rev-parse", "corral/notes~1") == git(refs, "rev-parse", "HEAD")

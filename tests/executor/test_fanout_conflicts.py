"""The conflict matrix of a fanout, held against git itself.

Diffs come from real git (``git diff`` of a committed base, default context,
as corral's own diffs are), and the verdicts are checked against ``git
merge-file`` (what ``corral apply --3way`` runs): two changes of one file that
the matrix calls clean must merge without a conflict marker, and the classic
cases where git does conflict (the same line, adjacent lines, an insertion at
the same place) must be conflicts. Hypothesis generates edits on both sides
of random small files.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.fanout.conflicts import compare, matrix, parse_patch
from tests.backends import git

LINES = [f"line {n}" for n in range(1, 13)]


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


class Repo:
    """A committed base in a real repository; each side's diff made by git."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        git(root, "init", "-q")

    def commit(self, files: dict[str, bytes | str]) -> None:
        for name, content in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", "base")

    def diff(self, change: dict[str, bytes | str | None], *, mode: dict[str, int] | None = None,
             rename: dict[str, str] | None = None) -> bytes:
        """The patch of one side (``None`` deletes a file), and back to the base."""
        for old, new in (rename or {}).items():
            (self.root / old).rename(self.root / new)
        for name, content in change.items():
            path = self.root / name
            if content is None:
                path.unlink()
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
        for name, bits in (mode or {}).items():
            (self.root / name).chmod(bits)
        git(self.root, "add", "-A")
        patch = subprocess.run(["git", "diff", "--cached", "-M", "--binary", "--full-index"],
                               cwd=self.root, capture_output=True, check=True).stdout
        git(self.root, "reset", "-q", "--hard")
        git(self.root, "clean", "-qfd")
        return patch


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "r")


def merge_conflicts(tmp: Path, base: str, ours: str, theirs: str) -> int:
    """How many conflicts ``git merge-file`` leaves (its exit code)."""
    for name, text in (("base", base), ("ours", ours), ("theirs", theirs)):
        (tmp / name).write_text(text)
    done = subprocess.run(["git", "merge-file", "-p", "ours", "base", "theirs"], cwd=tmp,
                          capture_output=True, check=False)
    assert done.returncode >= 0
    return done.returncode


def relate(repo: Repo, base: str, ours: str, theirs: str) -> tuple[bool, bool]:
    """(the matrix says conflict, git merge-file says conflict) for one file f.txt."""
    a = parse_patch(repo.diff({"f.txt": ours}))
    b = parse_patch(repo.diff({"f.txt": theirs}))
    result = compare(a, b)
    return bool(result.conflicts), merge_conflicts(repo.root.parent, base, ours, theirs) > 0


def edit(lines: list[str], at: int, new: list[str], removed: int = 1) -> str:
    return _text(lines[:at] + new + lines[at + removed:])


@pytest.mark.parametrize(("ours", "theirs", "conflict"), [
    pytest.param(edit(LINES, 1, ["ONE"]), edit(LINES, 9, ["TEN"]), False, id="distant-lines"),
    pytest.param(edit(LINES, 4, ["FIVE"]), edit(LINES, 4, ["five!"]), True, id="same-line"),
    pytest.param(edit(LINES, 4, ["FIVE"]), edit(LINES, 5, ["SIX"]), True, id="adjacent-lines"),
    pytest.param(edit(LINES, 4, ["FIVE"]), edit(LINES, 6, ["SEVEN"]), False,
                 id="one-line-apart"),
    pytest.param(edit(LINES, 4, ["new a"], 0), edit(LINES, 4, ["new b"], 0), True,
                 id="insert-at-same-place"),
    pytest.param(edit(LINES, 4, ["FIVE"]), edit(LINES, 4, ["FIVE"]), False,
                 id="identical-change"),
    pytest.param(edit(LINES, 3, [], 3), edit(LINES, 5, ["SIX"]), True, id="delete-over-edit"),
])
def test_the_matrix_agrees_with_git_merge_file(repo: Repo, ours: str, theirs: str,
                                               conflict: bool) -> None:
    repo.commit({"f.txt": _text(LINES)})
    assert relate(repo, _text(LINES), ours, theirs) == (conflict, conflict)


_EDIT = st.tuples(st.integers(0, 11), st.integers(0, 3),
                  st.lists(st.sampled_from(["x", "y", "line 3", "line 9"]), max_size=3))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ours=st.lists(_EDIT, min_size=1, max_size=2), theirs=st.lists(_EDIT, min_size=1,
                                                                       max_size=2))
def test_a_pair_the_matrix_calls_clean_always_merges_without_a_marker(
        tmp_path_factory: pytest.TempPathFactory, ours: list[tuple[int, int, list[str]]],
        theirs: list[tuple[int, int, list[str]]]) -> None:
    """Safety: never "no conflict" where ``corral apply --3way`` would leave markers."""
    repo = Repo(tmp_path_factory.mktemp("p") / "r")
    repo.commit({"f.txt": _text(LINES)})

    def apply(edits: list[tuple[int, int, list[str]]]) -> str:
        lines = list(LINES)
        for at, removed, new in sorted(edits, reverse=True):
            lines[at:at + removed] = new
        return _text(lines)

    mine, other = apply(ours), apply(theirs)
    if mine == _text(LINES) or other == _text(LINES):
        return  # one side changed nothing: no diff, nothing to compare
    says, git_says = relate(repo, _text(LINES), mine, other)
    if not says:
        assert not git_says, (mine, other)


def test_path_level_conflicts(repo: Repo) -> None:
    repo.commit({"a.txt": _text(LINES), "b.txt": "b\n", "bin": b"\x00\x01\x02",
                 "run.sh": "echo\n"})
    edited = parse_patch(repo.diff({"a.txt": edit(LINES, 1, ["TWO"])}))
    deleted = parse_patch(repo.diff({"a.txt": None}))
    renamed = parse_patch(repo.diff({}, rename={"a.txt": "c.txt"}))
    added_x = parse_patch(repo.diff({"new.txt": "x\n"}))
    added_y = parse_patch(repo.diff({"new.txt": "y\n"}))
    binary_1 = parse_patch(repo.diff({"bin": b"\x00\x01\x03"}))
    binary_2 = parse_patch(repo.diff({"bin": b"\x00\x01\x04"}))
    chmod = parse_patch(repo.diff({}, mode={"run.sh": 0o755}))
    touch = parse_patch(repo.diff({"run.sh": "echo hi\n"}))
    other = parse_patch(repo.diff({"b.txt": "B\n"}))
    assert compare(edited, deleted).conflicts == {
        "a.txt": "deleted by one, changed by the other"}
    assert compare(renamed, edited).conflicts == {
        "a.txt": "renamed to c.txt by one, changed by the other"}
    assert compare(added_x, added_y).conflicts == {
        "new.txt": "added by both, with different content"}
    assert compare(added_x, added_x) == compare(deleted, deleted)  # identical: nothing
    assert not compare(added_x, added_x).conflicts and not compare(added_x, added_x).same_files
    assert compare(binary_1, binary_2).conflicts == {"bin": "a binary change"}
    assert compare(chmod, touch).conflicts == {"run.sh": "a mode or type change"}
    assert compare(edited, other).conflicts == {} and compare(edited, other).same_files == ()
    assert list(matrix([("A", edited), ("B", other), ("C", deleted)])) == [
        ("A", "C", compare(edited, deleted))]


def test_paths_git_quotes_are_read_back(repo: Repo) -> None:
    names = ["sp ace.txt", "tab\there.txt", "caf\u00e9.txt", 'quo"te.txt']
    repo.commit(dict.fromkeys(names, "x\n"))
    files = parse_patch(repo.diff(dict.fromkeys(names, "y\n")))
    assert sorted(f.new_path or "" for f in files) == sorted(names)
    assert all(f.old_path == f.new_path and f.added == 1 and f.removed == 1 for f in files)


def test_line_counts_and_no_newline_markers(repo: Repo) -> None:
    repo.commit({"f.txt": _text(LINES)})
    [patch] = parse_patch(repo.diff({"f.txt": _text(LINES[:-1]) + "last"}))
    assert (patch.added, patch.removed) == (1, 1)
    [block] = patch.blocks
    assert block.start == 12 and block.removed == ("line 12",)
    assert block.added == ("last",) and block.eof == "+"

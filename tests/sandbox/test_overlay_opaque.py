"""A directory replaced by a directory of the same name: an opaque directory in the upper layer.

``rm -rf d && mkdir d`` in an overlay leaves, in the upper layer, a new ``d`` marked
opaque (``trusted.overlay.opaque``): it hides everything the snapshot had under
``d``, without one whiteout per file. The upper-layer walk must read that mark: taken
for a copied-up directory, ``d`` would only nominate the files the child wrote into it,
and every file of the snapshot's ``d`` the child deleted would be missing from the diff
(and from every review and apply of it). The same commands in a plain worktree give
the reference diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sbx_support import backend_config, diff_facts, diffs_by_kind, git, make_repo, overlay_backends

TRACKED = {"d/a.txt": "a\n", "d/b.txt": "b\n", "d/sub/c.txt": "c\n", "d/sub/deeper/e.txt": "e\n",
           "keep/x/one.txt": "1\n", "keep/x/two.txt": "2\n", "keep/y.txt": "y\n"}

SCRIPTS = {
    # the whole directory replaced: one file of the same name written again, one new
    "top": ("rm -rf d && mkdir d && printf 'a, again\\n' > d/a.txt && "
            "printf 'new\\n' > d/new.txt", {"d/b.txt", "d/sub/c.txt", "d/sub/deeper/e.txt"}),
    # replaced and left empty
    "empty": ("rm -rf d && mkdir d", {"d/a.txt", "d/b.txt", "d/sub/c.txt",
                                      "d/sub/deeper/e.txt"}),
    # a directory below a copied-up one (keep/ holds an edit, keep/x is replaced)
    "nested": ("printf 'edit\\n' >> keep/y.txt && rm -rf keep/x && mkdir -p keep/x/inner && "
               "printf 'z\\n' > keep/x/inner/z.txt", {"keep/x/one.txt", "keep/x/two.txt"}),
}


def _repo(path: Path) -> Path:
    repo = make_repo(path)
    for rel, text in TRACKED.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "dirs")
    return repo


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_deletions_under_a_replaced_directory_are_in_the_diff(backend: str, tmp_path: Path,
                                                              case: str) -> None:
    script, deleted = SCRIPTS[case]
    diffs = diffs_by_kind(backend_config(backend), _repo(tmp_path / "repo"),
                          tmp_path / "state", script)
    overlay = diffs["overlay"]
    statuses = {c.path: c.status for c in overlay.changed}
    assert {path for path, status in statuses.items() if status == "deleted"} == deleted
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    for path in deleted:
        assert f"--- a/{path}\n+++ /dev/null".encode() in overlay.patch

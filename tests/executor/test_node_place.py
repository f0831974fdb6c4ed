"""A Ray node's own directory (``executor.scheduling.node.node_place``) is private by
construction (issue 28): another local user who made it first in the temp dir (to read the
shipped snapshots and config, or rewrite a diff before the node packs it) is refused, never
tightened or followed. No cluster is needed: the node id is any hex id."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from executor.scheduling.node import node_place
from sandbox.state import PrivateDirUnsafe

NODE = "0123456789abcdef0123"
OTHER_UID = 12345
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp dir the node sees (nothing of the machine's own), no override, no XDG dir."""
    place = tmp_path / "tmp"
    place.mkdir(mode=0o1777)
    place.chmod(0o1777)  # as the shared temp dir is
    monkeypatch.delenv("CORRAL_RAY_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    return place


def refused(what: str) -> Any:
    """Raises :class:`PrivateDirUnsafe` whose message holds ``what``."""
    return pytest.raises(PrivateDirUnsafe, match=re.escape(what))


def _private(path: Path) -> bool:
    info = os.lstat(path)
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and stat.S_IMODE(info.st_mode) == 0o700)


def test_a_fresh_place_is_made_private_under_the_temp_dir(tmp: Path) -> None:
    place = node_place(NODE)
    base = tmp / f"corral-ray-{os.geteuid()}"
    assert place == base / NODE[:16]
    assert _private(base) and _private(place)
    assert node_place(NODE) == place  # the same place, checked again


def test_a_private_xdg_runtime_dir_is_the_base(tmp: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    place = node_place(NODE)
    assert place == runtime / "corral-ray" / NODE[:16]
    assert _private(runtime / "corral-ray") and _private(place)


def test_an_xdg_runtime_dir_others_reach_is_not_used(tmp: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir()
    runtime.chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert node_place(NODE).parent == tmp / f"corral-ray-{os.geteuid()}"
    assert not (runtime / "corral-ray").exists()


@root_only
def test_a_base_another_user_made_first_is_refused(tmp: Path) -> None:
    base = tmp / f"corral-ray-{os.geteuid()}"
    base.mkdir(mode=0o700)
    os.chown(base, OTHER_UID, OTHER_UID)
    with refused(f"{base} is not safe to use: it is owned by uid {OTHER_UID}") as caught:
        node_place(NODE)
    assert caught.value.code == "private_dir_unsafe"
    assert caught.value.context["path"] == str(base)
    assert "CORRAL_RAY_DIR" in (caught.value.hint or "")
    assert list(base.iterdir()) == []  # nothing made in it
    assert os.lstat(base).st_uid == OTHER_UID  # and nothing changed


@root_only
def test_a_node_dir_another_user_made_first_is_refused(tmp: Path) -> None:
    base = tmp / f"corral-ray-{os.geteuid()}"
    base.mkdir(mode=0o700)
    (base / NODE[:16]).mkdir(mode=0o700)
    os.chown(base / NODE[:16], OTHER_UID, OTHER_UID)
    with refused(f"it is owned by uid {OTHER_UID}"):
        node_place(NODE)


def test_a_symlink_in_place_of_the_base_is_refused(tmp: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)  # even one of ours, private: never followed
    base = tmp / f"corral-ray-{os.geteuid()}"
    base.symlink_to(elsewhere)
    with refused("it is a symlink"):
        node_place(NODE)
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_in_place_of_the_node_dir_is_refused(tmp: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    node_place(NODE).rmdir()
    (tmp / f"corral-ray-{os.geteuid()}" / NODE[:16]).symlink_to(elsewhere)
    with refused("it is a symlink"):
        node_place(NODE)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o711], ids=["group", "other", "traversable"])
def test_a_base_others_may_reach_is_refused_not_tightened(tmp: Path, mode: int) -> None:
    base = tmp / f"corral-ray-{os.geteuid()}"
    base.mkdir()
    base.chmod(mode)
    with refused(f"its mode is {mode:04o}"):
        node_place(NODE)
    assert stat.S_IMODE(os.lstat(base).st_mode) == mode


def test_a_file_in_place_of_the_base_is_refused(tmp: Path) -> None:
    (tmp / f"corral-ray-{os.geteuid()}").write_text("x")
    with refused("it is not a directory"):
        node_place(NODE)


def test_the_override_is_made_private_and_checked_the_same_way(
        tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = tmp_path / "nodes" / "here"
    monkeypatch.setenv("CORRAL_RAY_DIR", str(fresh))
    place = node_place(NODE)
    assert place == fresh / NODE[:16] and _private(fresh) and _private(place)
    assert not (tmp / f"corral-ray-{os.geteuid()}").exists()

    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o750)
    monkeypatch.setenv("CORRAL_RAY_DIR", str(group))
    with refused(f"{group} is not safe to use: its mode is 0750"):
        node_place(NODE)

    link = tmp_path / "link"
    link.symlink_to(fresh)
    monkeypatch.setenv("CORRAL_RAY_DIR", str(link))
    with refused("it is a symlink"):
        node_place(NODE)


@root_only
def test_an_override_of_another_user_is_refused(tmp: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("CORRAL_RAY_DIR", str(theirs))
    with refused(f"it is owned by uid {OTHER_UID}"):
        node_place(NODE)


@pytest.mark.parametrize("node", ["../x", "../../x", "0123456789abcdef/../../x", "", "x" * 8])
def test_a_node_id_that_is_no_hex_id_names_no_directory(tmp: Path, node: str) -> None:
    """What Ray says is the node id names the directory: ``../x`` (or anything but 8 to 64
    hex digits) is refused before anything is made, so no place lands beside the base."""
    with pytest.raises(ValueError, match="not a Ray node id"):
        node_place(node)
    assert [p.name for p in tmp.rglob("*") if p.name == "x"] == []
    assert not (tmp.parent / "x").exists()

"""Stand-ins for image directories a container user cannot traverse (docker backend).

The docker backend mounts the workspace at its host path, so ``pwd``, absolute
paths and the ``.git`` pointer mean the same inside the container. Directories
above a mount that the image already has keep the image's mode, and an image's
``/root`` is ``0700``: with corral running as root (state under
``~/.local/state``), the command's uid could not reach its own workspace by an
absolute path. :func:`closed_ancestors` finds such directories from their mode
in the image (looked up by the backend); :func:`make_stand_ins` builds, for
each, a directory of mode 755 holding only the empty mount points that land in
it, to be bound read-only over it. A tmpfs will not do: the runtime gives a
tmpfs the mode of the directory it covers. What a stand-in hides is exactly
what the uid could not reach; nothing of the host is in it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

__all__ = ["ImageModes", "closed_ancestors", "make_stand_ins"]

#: Go ``os.FileMode`` bits, as docker reports a path's mode.
GO_DIR, GO_SYMLINK = 1 << 31, 1 << 27
#: Every Go type bit: a mode with none of them is a regular file.
_GO_TYPE = GO_DIR | GO_SYMLINK | 1 << 26 | 1 << 25 | 1 << 24 | 1 << 21 | 1 << 19


def _typed(found: tuple[int, str] | None) -> tuple[bool, str, bool] | None:
    """(is a symlink, its target, is a regular file) of an archive ``HEAD`` answer."""
    if found is None:
        return None
    mode, target = found
    return bool(mode & GO_SYMLINK), target, not mode & _GO_TYPE


def _traversable(mode: int, uid: int) -> bool:
    """Whether ``uid`` may traverse an image directory. Its owner is not reported: image
    directories are root's, so only "others" count for another uid."""
    return bool(mode & 0o001 or (uid == 0 and mode & 0o100))


def closed_ancestors(mounts: Iterable[Path], *, image_mode: Callable[[str], int | None],
                     uid: int, fresh: Iterable[str] = ()) -> list[PurePosixPath]:
    """Image directories above a mount that ``uid`` cannot traverse, topmost only.

    ``image_mode(path)`` is the path's Go file mode in the image (``None``:
    absent, so the runtime makes it with mode 755); ``fresh`` are the
    container's own tmpfs mounts, whose insides the runtime makes too.
    """
    targets = [PurePosixPath(path) for path in mounts]
    own = [*targets, *(PurePosixPath(path) for path in fresh)]
    masks: list[PurePosixPath] = []
    modes: dict[PurePosixPath, int | None] = {}
    for target in targets:
        for ancestor in list(reversed(target.parents))[1:]:
            if any(ancestor.is_relative_to(mount) for mount in own):
                break  # from here down, the host's modes (or a fresh tmpfs) decide
            if ancestor not in modes:
                modes[ancestor] = image_mode(str(ancestor))
            mode = modes[ancestor]
            if mode is None:
                break  # not in the image: the runtime makes it and what is below
            if mode & GO_SYMLINK or not mode & GO_DIR or _traversable(mode, uid):
                continue
            if ancestor not in masks:
                masks.append(ancestor)
            break  # the stand-in hides everything below it
    return masks


def _open_dir(path: Path) -> None:
    """Make ``path`` and its missing parents with mode 755, whatever the umask."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)


def make_stand_ins(masks: list[PurePosixPath], mounts: list[Path], *,
                   under: Path) -> list[tuple[PurePosixPath, Path]]:
    """(directory to cover, stand-in made under ``under``) for each of ``masks``.

    Each stand-in holds the mount point of every mount that lands directly in
    it (not inside another mount), as an empty directory or file like its
    source, since the runtime cannot make them in a read-only bind.
    """
    pairs = []
    inners = [PurePosixPath(mount) for mount in mounts]
    for number, mask in enumerate(masks):
        source = under / str(number)
        _open_dir(source)
        for mount, inner in zip(mounts, inners, strict=True):
            if not inner.is_relative_to(mask) or any(
                    other != inner and other.is_relative_to(mask) and inner.is_relative_to(other)
                    for other in inners):
                continue  # elsewhere, or inside another mount that provides its point
            point = source.joinpath(*inner.relative_to(mask).parts)
            if mount.is_dir():
                _open_dir(point)
            else:
                _open_dir(point.parent)
                point.touch(mode=0o644)
        pairs.append((mask, source))
    return pairs


class ImageModes:
    """The modes of an image's own directories, cached by image id under the state dir.

    An image never changes, so what :func:`closed_ancestors` learnt of one (the archive
    ``HEAD`` of each ancestor, which needs a created container) is asked once per image
    and state dir: the next sandbox of that image is created once, with its stand-ins,
    instead of twice. A wrong entry (a tampered cache in the private state dir) could only
    add a stand-in (an empty, read-only directory hiding an image directory) or omit one
    (the command's uid then cannot reach its workspace): never expose anything.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.modes: dict[str, int | None] = {}
        #: Each path's archive ``HEAD`` answer, kept whole: its Go mode and link target.
        self.stats: dict[str, tuple[int, str] | None] = {}
        self.changed = False
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        if isinstance(loaded, dict) and isinstance(loaded.get("modes"), dict):
            self.modes = {str(k): v for k, v in loaded["modes"].items()
                          if v is None or isinstance(v, int)}
            stats = loaded.get("stats")
            for key, value in (stats.items() if isinstance(stats, dict) else ()):
                if value is None:
                    self.stats[str(key)] = None
                elif (isinstance(value, list) and len(value) == 2  # a pair
                      and isinstance(value[0], int) and isinstance(value[1], str)):
                    self.stats[str(key)] = (value[0], value[1])

    @classmethod
    def of(cls, state_root: Path, image_id: str) -> ImageModes:
        """The cache of image ``image_id`` (``sha256:...``) under ``state_root``."""
        name = image_id.rsplit(":", maxsplit=1)[-1][:64]
        return cls(state_root / "docker-image-modes" / f"{name}.json")

    def known(self, path: str) -> int | None:
        """The cached mode of ``path``; :class:`KeyError` when it is not cached."""
        return self.modes[path]

    def learning(self, ask: Callable[[str], int | None]) -> Callable[[str], int | None]:
        """``ask``, remembering each answer."""
        def image_mode(path: str) -> int | None:
            if path not in self.modes:
                self.modes[path] = ask(path)
                self.changed = True
            return self.modes[path]
        return image_mode

    def known_stat(self, path: str) -> tuple[bool, str, bool] | None:
        """The cached type of ``path`` (:func:`sandbox.denials.image_denials` reads it);
        :class:`KeyError` when it is not cached."""
        return _typed(self.stats[path])

    def learning_stat(self, ask: Callable[[str], tuple[int, str] | None],
                      ) -> Callable[[str], tuple[bool, str, bool] | None]:
        """``ask`` (a path's Go mode and link target), remembering each answer, as a type."""
        def image_stat(path: str) -> tuple[bool, str, bool] | None:
            if path not in self.stats:
                self.stats[path] = ask(path)
                self.changed = True
            return _typed(self.stats[path])
        return image_stat

    def save(self) -> None:
        """Write what was learnt (atomically; a failure only costs the next run a lookup)."""
        if not self.changed:
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            scratch = self.path.with_suffix(f".{os.getpid()}.tmp")
            scratch.write_text(json.dumps({"modes": self.modes, "stats": self.stats},
                                          sort_keys=True), encoding="utf-8")
            scratch.replace(self.path)

"""Applying a judged patch to the checkout: all or nothing, or a validated three-way merge.

:func:`apply_to_checkout` runs, in order:

1. :func:`executor.apply.patch.inspect_patch` (unless a judged plan is given);
2. :func:`executor.apply.checkout.open_checkout` (a repository whose config
   names a program is refused) and :func:`~executor.apply.checkout.check_checkout`:
   every path the patch touches, and every parent of those, in the real checkout;
3. ``git apply --check``. When it or step 2 finds a problem: an already
   applied run (the reverse patch applies) says so and changes nothing;
   otherwise each file is diagnosed on its own (already there, changed since
   the child's snapshot, verified by hashing the file against the preimage's
   blob id, or git's own reason), and the apply is refused with every path
   named, unless ``three_way`` is asked for and every file that needs a
   merge has its preimage (in the repository, or kept with the record);
4. a fingerprint and a backup (:mod:`executor.apply.backup`) of every path,
   fsynced before anything is written;
5. ``git apply`` (hardened), or for a three-way merge ``git apply --3way``
   with a private index and object directory, so the user's index is never
   written: an apply changes the working tree only, as it always did;
6. a check that the index, the refs and the ignored files are unchanged.

A failure at any step after 4 (an exception of any kind, an interrupt
included) restores the backup and verifies the checkout is byte-identical
before the error is raised. Conflict markers are left only by a three-way
merge the user asked for, and each such file is reported.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from executor.apply.backup import Backup, backed_paths, fingerprint
from executor.apply.checkout import (
    Checkout,
    Conflict,
    check_checkout,
    open_checkout,
    renamed_modes,
)
from executor.apply.errors import ApplyFailed, MergeRefused, RestoreFailed
from executor.apply.patch import PatchFile, PatchPlan, inspect_patch
from executor.apply.preimages import find_preimage
from executor.apply.steps import git, step
from policies.errors import CorralError
from sandbox.gitsafe import git_env
from sandbox.workspaces.privategit import object_dirs

__all__ = ["ApplyResult", "apply_to_checkout"]

_DIAGNOSED = 500
_UNCHANGED = ("index", "refs", "ignored")


@dataclass
class ApplyResult:
    """What an apply did (``status``: applied, checked, already_applied, conflicts)."""

    status: str
    files: list[str] = field(default_factory=list)
    #: Files git merged three ways (their checkout version changed since the snapshot).
    merged: list[str] = field(default_factory=list)
    #: Files left with conflict markers (three-way only).
    conflicts: list[str] = field(default_factory=list)
    backup: Path | None = None


def _stderr(done: subprocess.CompletedProcess[bytes]) -> str:
    raw = done.stderr or b""
    lines = [line for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
    return "; ".join(lines)[:400]


def _check(checkout: Checkout, data: bytes, *reverse: str) -> tuple[bool, str]:
    done = git(f"apply --check{' -R' if reverse else ''}", ["apply", "--check", *reverse, "-"],
               git_dir=checkout.git_dir, top=checkout.top, input_bytes=data)
    return done.returncode == 0, _stderr(done)


def _hashes(checkout: Checkout, paths: list[str]) -> dict[str, str]:
    """Blob ids of files of the checkout as git would store them (its conversions)."""
    files = [p for p in paths if (checkout.top / p).is_file()
             and not (checkout.top / p).is_symlink()]
    if not files:
        return {}
    done = git("hash-object", ["hash-object", "--stdin-paths"], git_dir=checkout.git_dir,
               top=checkout.top,
               input_bytes="".join(f"{p}\n" for p in files).encode("utf-8", "surrogateescape"))
    ids = done.stdout.decode().split()
    return dict(zip(files, ids, strict=False)) if done.returncode == 0 else {}


@dataclass
class _Diagnosis:
    already: list[str] = field(default_factory=list)
    changed: list[PatchFile] = field(default_factory=list)
    other: list[Conflict] = field(default_factory=list)


def _diagnose(checkout: Checkout, plan: PatchPlan, *, skip: set[str]) -> _Diagnosis:
    """Why each file's section does not apply, one file at a time (but those in ``skip``,
    already explained)."""
    found = _Diagnosis()
    failing: list[tuple[PatchFile, str]] = []
    for item in plan.files[:_DIAGNOSED]:
        if skip & {*item.sources, *item.targets}:
            continue
        ok, why = _check(checkout, plan.section(item))
        if not ok:
            failing.append((item, why))
    sources = [item.sources[0] for item, _ in failing if item.sources and item.old_blob]
    current = _hashes(checkout, sources)
    for item, why in failing:
        if _check(checkout, plan.section(item), "-R")[0]:
            found.already.append(item.path)
            continue
        source = item.sources[0] if item.sources else None
        now = current.get(source or "")
        if item.old_blob and now is not None and not now.startswith(item.old_blob):
            found.changed.append(item)
        else:
            found.other.append(Conflict(item.path, f"git cannot apply it: {why}"))
    if len(plan.files) > _DIAGNOSED:
        found.other.append(Conflict("...", f"{len(plan.files) - _DIAGNOSED} more file(s) "
                                    "were not diagnosed"))
    return found


def _already_there(checkout: Checkout, plan: PatchPlan,
                   conflicts: list[Conflict]) -> list[Conflict]:
    """A file in the way that is exactly what the patch creates is said so."""
    created = {item.path: item for item in plan.files if item.status == "added"}
    out = []
    for conflict in conflicts:
        item = created.get(conflict.path)
        there = item is not None and _check(checkout, plan.section(item), "-R")[0]
        out.append(Conflict(conflict.path, "already has the child's version (the rest of "
                            "the run does not)") if there else conflict)
    return out


def _refuse(conflicts: list[Conflict], *, hint: str) -> MergeRefused:
    return MergeRefused(
        f"the patch does not apply to this checkout ({len(conflicts)} path(s)); nothing "
        "was changed", code="apply_conflict",
        context={"conflicts": "\n    " + "\n    ".join(str(c) for c in conflicts)}, hint=hint)


def _three_way(checkout: Checkout, plan: PatchPlan, work: Path,
               needed: Mapping[str, Path]) -> list[str]:
    """``git apply --3way`` with a private index and object directory; the conflicted
    paths."""
    objects = work / "objects"
    (objects / "info").mkdir(parents=True)
    (objects / "info" / "alternates").write_text(
        "".join(f"{d}\n" for d in object_dirs(checkout.common_dir)))
    env = git_env(index_file=work / "index", object_dir=objects)
    if needed:
        listed = list(needed.items())
        done = git("hash-object -w", ["hash-object", "-w", "--no-filters", "--stdin-paths"],
                   git_dir=checkout.git_dir, top=checkout.top, env=env,
                   input_bytes="".join(f"{path}\n" for _, path in listed).encode())
        if done.stdout.decode().split() != [full for full, _ in listed]:
            raise ApplyFailed("the kept preimages could not be loaded", context={
                "git": _stderr(done)})
    present = [p for p in plan.touched if (checkout.top / p).is_symlink()
               or (checkout.top / p).is_file()]
    if present:
        done = git("update-index", ["update-index", "--add", "-z", "--stdin"],
                   git_dir=checkout.git_dir, top=checkout.top, env=env,
                   input_bytes=b"".join(p.encode("utf-8", "surrogateescape") + b"\0"
                                        for p in present))
        if done.returncode != 0:
            raise ApplyFailed(f"could not prepare the merge: {_stderr(done)}")
    done = git("apply --3way", ["apply", "--3way", "-"], git_dir=checkout.git_dir,
               top=checkout.top, env=env, input_bytes=plan.data)
    unmerged = git("ls-files -u", ["ls-files", "-u", "-z"], git_dir=checkout.git_dir,
                   top=checkout.top, env=env)
    conflicted = sorted({entry.partition("\t")[2] for entry in unmerged.stdout.decode(
        "utf-8", "surrogateescape").split("\0") if entry})
    if done.returncode != 0 and not conflicted:
        raise ApplyFailed(f"git apply --3way failed: {_stderr(done)}")
    return conflicted


def _preimages_needed(checkout: Checkout, items: list[PatchFile],
                      kept: Mapping[str, Path]) -> tuple[dict[str, Path], list[Conflict]]:
    """The kept preimages a merge of ``items`` needs, and the files that cannot merge."""
    needed: dict[str, Path] = {}
    missing: list[Conflict] = []
    with_ids = [item for item in items if item.old_blob]
    done = git("cat-file --batch-check", ["cat-file", "--batch-check"],
               git_dir=checkout.git_dir, top=checkout.top,
               input_bytes="".join(f"{item.old_blob}\n" for item in with_ids).encode())
    answers = dict(zip((id(item) for item in with_ids),
                       done.stdout.decode("utf-8", "replace").splitlines(), strict=False))
    for item in items:
        answer = answers.get(id(item), "").split()
        if len(answer) == 3 and answer[1] == "blob":
            continue  # the repository has it
        path = find_preimage(kept, item.old_blob) if item.old_blob else None
        if path is not None:
            needed[path.name] = path
        else:
            missing.append(Conflict(item.path, "changed since the child's snapshot, and the "
                                    "version the child started from was not kept, so it "
                                    "cannot be merged"))
    return needed, missing


def apply_to_checkout(root: Path, patch: bytes | str, *, plan: PatchPlan | None = None,
                      allow_symlinks: bool = False, allow_binary: bool = False,
                      allow_git_dirs: bool = False, check_only: bool = False,
                      three_way: bool = False, backups: Path | None = None,
                      preimages: Mapping[str, Path] | None = None,
                      run_hint: str = "RUN") -> ApplyResult:
    """Apply ``patch`` at the top of the checkout containing ``root`` (module docstring).

    ``backups`` is where the backup goes (kept after a successful apply; by
    default a private temporary directory, removed then). ``preimages`` are
    the kept preimages of the run ({full blob id: file}).
    """
    data = patch.encode("utf-8", "surrogateescape") if isinstance(patch, str) else patch
    if plan is None:
        plan = inspect_patch(data, allow_symlinks=allow_symlinks, allow_binary=allow_binary,
                             allow_git_dirs=allow_git_dirs)
        if plan.problems:
            raise MergeRefused("the diff is not safe to merge",
                               context={"problems": "; ".join(plan.problems)})
    try:
        checkout = open_checkout(root)
        renamed_modes(checkout, plan, allow_symlinks=allow_symlinks)
        merged, needed = _judge(checkout, plan, allow_git_dirs=allow_git_dirs,
                                three_way=three_way, preimages=preimages or {},
                                run_hint=run_hint)
    except OSError as exc:
        raise ApplyFailed(f"checking the checkout failed ({exc}); nothing was changed") from exc
    if merged is None:
        return ApplyResult("already_applied", plan.touched)
    if check_only:
        return ApplyResult("checked", plan.touched, merged=merged)
    return _write(checkout, plan, plan.touched, merged, needed, three_way=bool(merged),
                  backups=backups)


def _judge(checkout: Checkout, plan: PatchPlan, *, allow_git_dirs: bool, three_way: bool,
           preimages: Mapping[str, Path], run_hint: str
           ) -> tuple[list[str] | None, dict[str, Path]]:
    """Steps 2-3 of the module docstring: (the files that need a three-way merge, or None
    when the run is already applied; the kept preimages the merge needs)."""
    unsafe, conflicts = check_checkout(checkout, plan, allow_git_dirs=allow_git_dirs)
    if unsafe:
        raise MergeRefused("the diff is not safe to merge into this checkout",
                           context={"problems": "; ".join(unsafe)})
    clean, why = _check(checkout, plan.data)
    if clean and not conflicts:
        return [], {}
    if _check(checkout, plan.data, "-R")[0]:
        return None, {}
    found = _diagnose(checkout, plan, skip={c.path for c in conflicts})
    blocked = _already_there(checkout, plan, conflicts) + found.other
    if not (blocked or found.changed or found.already):
        blocked.append(Conflict("(the patch as a whole)", f"git cannot apply it: {why}"))
    merge: list[PatchFile] = []
    needed: dict[str, Path] = {}
    if three_way and not conflicts:
        merge = found.changed + [f for f in plan.files if f.path in found.already]
        needed, missing = _preimages_needed(checkout, merge, preimages)
        blocked += missing
    else:
        blocked += [Conflict(item.path, "changed since the child's snapshot")
                    for item in found.changed]
        blocked += [Conflict(path, "already has the child's version (the rest of the run "
                             "does not)") for path in found.already]
    if blocked:
        hints = []
        if conflicts:
            hints.append("move the files in the way elsewhere (they are not part of the "
                         "child's snapshot)")
        if found.changed and not three_way:
            hints.append(f"`corral apply --3way {run_hint}` merges the child's changes into "
                         "yours, marking conflicts in the files")
        elif not conflicts:
            hints.append("bring the files named above back to the version the child started "
                         "from (or commit or stash your changes there)")
        raise _refuse(sorted(blocked, key=lambda c: c.path),
                      hint="; ".join(hints) + ", then apply again")
    return sorted(item.path for item in merge), needed


def _write(checkout: Checkout, plan: PatchPlan, files: list[str], merged: list[str],
           needed: Mapping[str, Path], *, three_way: bool, backups: Path | None) -> ApplyResult:
    """Steps 4-6 of the module docstring."""
    temporary = backups is None
    parent = Path(tempfile.mkdtemp(prefix="corral-apply-")) if backups is None else backups
    paths = backed_paths(files)
    try:
        before = fingerprint(checkout, paths)
        backup = Backup.create(parent, checkout, paths, before, label="apply")
    except (OSError, CorralError) as exc:
        if temporary:
            shutil.rmtree(parent, ignore_errors=True)
        raise ApplyFailed(f"could not save a backup before applying: {exc}; nothing was "
                          "changed") from exc
    try:
        conflicted: list[str] = []
        if three_way:
            conflicted = _three_way(checkout, plan, backup.dir / "merge", needed)
        else:
            done = git("apply", ["apply", "-"], git_dir=checkout.git_dir, top=checkout.top,
                       input_bytes=plan.data)
            if done.returncode != 0:
                raise ApplyFailed(f"git apply failed: {_stderr(done)}")
        step("applied")
        after = fingerprint(checkout, paths)
        changed = [key for key in _UNCHANGED if after[key] != before[key]]
        if changed:
            raise ApplyFailed(f"the apply changed what it must not: {', '.join(changed)}")
        backup.mark("conflicts" if conflicted else "applied")
    except BaseException as exc:
        backup.restore(checkout)  # RestoreFailed (the backup stays) when it cannot
        shutil.rmtree(backup.dir, ignore_errors=True)
        if temporary:
            shutil.rmtree(parent, ignore_errors=True)
        if isinstance(exc, RestoreFailed):
            raise
        if isinstance(exc, (OSError, CorralError)):
            message = exc.message if isinstance(exc, CorralError) else str(exc)
            raise ApplyFailed(f"the apply failed ({message}); the checkout was restored from "
                              "the backup and verified unchanged") from exc
        raise
    with contextlib.suppress(OSError):
        shutil.rmtree(backup.dir / "merge")
    if temporary:
        shutil.rmtree(parent, ignore_errors=True)
    return ApplyResult("conflicts" if conflicted else "applied", files, merged=merged,
                       conflicts=conflicted, backup=None if temporary else backup.dir)

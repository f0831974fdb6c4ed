"""Running git on the host without letting a repository run anything (threats B2).

Every git process the sandbox starts goes through :func:`run_git`, which

- builds its environment from scratch: no inherited ``GIT_*`` variable (so no
  ``GIT_CONFIG_PARAMETERS``, ``GIT_EXTERNAL_DIFF``, ``GIT_DIR``), system and
  global configuration and system attributes off (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_ATTR_NOSYSTEM=1``), ``HOME`` and
  ``XDG_CONFIG_HOME`` pointing nowhere, replace refs ignored, no prompts;
- always names the repository explicitly (``--git-dir``, ``--work-tree``), so
  no ``.git`` pointer the child could rewrite is ever followed;
- passes ``-c`` overrides that disable hooks, fsmonitor, the pager, the
  untracked cache and split index, and make stat checks strict.

What is left is the repository's *local* configuration, which the child cannot
write (it is mounted read-only inside bubblewrap and docker) but which may
already name programs. :func:`unsafe_config_keys` lists every key that makes
git run a program; corral refuses such repositories rather than relying on
each override. That includes every filter, diff and merge *driver*
(``filter.*.clean``, ``diff.*.textconv``, ``merge.*.driver``, ...): with
system and global configuration off, the local configuration is the only place
a driver can be defined, so refusing it there means no ``.gitattributes`` line
(git 2.39 has no ``GIT_ATTR_SOURCE``) can select a driver that runs.

:func:`stream_git` runs the same hardened command but hands its output to a
sink chunk by chunk, and kills git as soon as the output passes a byte limit,
so a child's huge diff never has to fit in the parent's memory.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sandbox.errors import SandboxError, UnsafeRepository

__all__ = [
    "CHILD_GIT_CONFIG",
    "HARDENING",
    "UnsafeKey",
    "check_repository_config",
    "child_git_env",
    "git_env",
    "git_executable",
    "run_git",
    "spawn_git",
    "stream_git",
    "unsafe_config_keys",
]

#: ``-c`` overrides on every git command the sandbox runs.
HARDENING: tuple[str, ...] = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.pager=cat",
    "-c", "core.attributesFile=/dev/null",
    "-c", "core.untrackedCache=false",
    "-c", "core.splitIndex=false",
    "-c", "core.trustctime=true",
    "-c", "core.checkStat=default",
    "-c", "core.quotePath=true",
    "-c", "core.symlinks=true",
    "-c", "submodule.recurse=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.renames=true",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "protocol.allow=never",
)

#: Configuration every command in a sandbox gets (as ``GIT_CONFIG_COUNT`` variables: the
#: command scope, which overrides every file a repository brings, and is protected
#: configuration, where ``safe.bareRepository`` is read). A directory the child wrote as a
#: bare repository (``HEAD``, ``config``, ``objects/``, ``refs/``; the file API refuses
#: ``.git`` itself) is never discovered, so its ``core.fsmonitor``, pager, hooks or drivers
#: never run under an allowed ``git status``; and what a repository's config may name to run
#: is reset to the harmless default here too. ``diff.external`` and drivers have no neutral
#: value: they are left to the repositories, which are corral's own (read-only, and refused
#: when they name programs: :func:`check_repository_config`) or explicit (``--git-dir``).
CHILD_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "ssh"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
)


def child_git_env(ceilings: Sequence[Path]) -> dict[str, str]:
    """The variables that give a sandboxed command's git :data:`CHILD_GIT_CONFIG`, no pager,
    and no repository discovered above ``ceilings`` (the directories holding the workspace)."""
    env = {"GIT_CONFIG_COUNT": str(len(CHILD_GIT_CONFIG)), "GIT_PAGER": "cat",
           "GIT_CEILING_DIRECTORIES": ":".join(str(path) for path in ceilings)}
    for index, (key, value) in enumerate(CHILD_GIT_CONFIG):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    return env


#: Fixed identity and date for snapshot commits, so the same state gives the same id.
SNAPSHOT_IDENTITY: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": "corral",
    "GIT_AUTHOR_EMAIL": "corral@localhost",
    "GIT_AUTHOR_DATE": "@0 +0000",
    "GIT_COMMITTER_NAME": "corral",
    "GIT_COMMITTER_EMAIL": "corral@localhost",
    "GIT_COMMITTER_DATE": "@0 +0000",
}

# (section, leaf) pairs that make git run a program, compared case-insensitively
# and ignoring any subsection (so ``filter.anything.clean`` matches).
_EXECUTABLE_KEYS = frozenset({
    ("core", "fsmonitor"), ("core", "hookspath"), ("core", "pager"), ("core", "editor"),
    ("core", "sshcommand"), ("core", "askpass"), ("core", "gitproxy"),
    ("core", "alternaterefscommand"),
    ("diff", "external"), ("diff", "command"), ("diff", "textconv"),
    ("merge", "driver"), ("filter", "clean"), ("filter", "smudge"), ("filter", "process"),
    ("credential", "helper"), ("uploadpack", "packobjectshook"),
    ("include", "path"), ("includeif", "path"), ("sequence", "editor"),
    ("gpg", "program"), ("remote", "uploadpack"), ("remote", "receivepack"),
    ("remote", "vcs"), ("submodule", "update"), ("difftool", "cmd"), ("mergetool", "cmd"),
    ("web", "browser"), ("browser", "cmd"), ("man", "cmd"), ("trailer", "command"),
    ("trailer", "cmd"), ("sendemail", "smtpserver"), ("sendemail", "tocmd"),
    ("sendemail", "cccmd"),
})
# Sections where any key names a program.
_EXECUTABLE_SECTIONS = frozenset({"pager", "hook"})
# Values that run nothing, per key.
_HARMLESS_VALUES: Mapping[tuple[str, str], frozenset[str]] = {
    ("core", "fsmonitor"): frozenset({"false", "no", "off", "0", ""}),
    ("core", "hookspath"): frozenset({"/dev/null"}),
    ("core", "pager"): frozenset({"cat", ""}),
}


@dataclass(frozen=True)
class UnsafeKey:
    """One configuration entry that would run a program."""

    key: str
    value: str
    origin: str


@functools.cache
def git_executable() -> str:
    """The absolute path of ``git`` on the parent's ``PATH``."""
    found = shutil.which("git")
    if found is None:
        raise SandboxError(
            "git is not installed", code="git_missing", operation="git",
            hint="install git (corral needs it for worktrees and diffs)",
        )
    return found


def git_env(
    *,
    index_file: Path | None = None,
    object_dir: Path | None = None,
    alternates: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A git environment built from scratch; nothing is inherited except ``PATH``."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": "/nonexistent",
        "XDG_CONFIG_HOME": "/nonexistent",
        "LC_ALL": "C",
        "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "false",
        "GIT_ASKPASS": "false",
        "SSH_ASKPASS": "false",
        "GIT_SSH_COMMAND": "false",
    }
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    if object_dir is not None:
        env["GIT_OBJECT_DIRECTORY"] = str(object_dir)
    if alternates is not None:
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(alternates)
    if extra:
        env.update(extra)
    return env


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | None,
    work_tree: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_bytes: bytes | None = None,
    check: bool = True,
    operation: str = "git",
) -> subprocess.CompletedProcess[bytes]:
    """Run one hardened git command; raise :class:`SandboxError` when it fails.

    ``cwd`` defaults to ``/``: git never discovers a repository from a
    directory the child could write, and pathspecs use ``:(top)`` magic. Only
    the discovery of the parent's own repository passes ``git_dir=None`` and a
    ``cwd``.
    """
    argv = _argv(args, git_dir, work_tree)
    try:
        done = subprocess.run(  # noqa: S603 - fixed git argv with hardening flags and explicit dirs
            argv,
            input=input_bytes,
            capture_output=True,
            env=dict(env) if env is not None else git_env(),
            cwd=cwd or "/",
            check=False,
        )
    except OSError as exc:
        raise SandboxError(
            f"could not run git: {exc}", code="git_failed", operation=operation
        ) from exc
    if check and done.returncode != 0:
        raise _git_failed(args, git_dir, done.returncode, done.stderr, operation)
    return done


def _argv(args: Sequence[str], git_dir: Path | None, work_tree: Path | None) -> list[str]:
    argv = [git_executable(), *HARDENING]
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        argv.append(f"--work-tree={work_tree}")
    argv.extend(args)
    return argv


def _git_failed(args: Sequence[str], git_dir: Path | None, code: int, stderr_bytes: bytes,
                operation: str) -> SandboxError:
    stderr = stderr_bytes.decode("utf-8", "replace").strip()
    at = 0
    while at + 1 < len(args) and args[at] == "-c":  # name the command, not an override
        at += 2
    return SandboxError(
        f"git {args[at] if at < len(args) else ''} failed: {stderr[:500] or f'exit {code}'}",
        code="git_failed",
        operation=operation,
        context={"git_dir": git_dir, "args": " ".join(args)[:200]},
    )


_STREAM_CHUNK = 1 << 16


def stream_git(
    args: Sequence[str],
    *,
    git_dir: Path,
    work_tree: Path | None = None,
    env: Mapping[str, str],
    sink: BinaryIO,
    limit: int | None,
    operation: str = "git",
) -> int | None:
    """Run one hardened git command (as :func:`run_git`), writing its stdout to ``sink``.

    Returns the number of bytes written, or ``None`` as soon as the output
    passes ``limit``: git is killed then, and at most ``limit`` bytes (plus one
    chunk) were ever held. ``limit=None`` streams everything. A failing git
    raises :class:`SandboxError`.
    """
    argv = _argv(args, git_dir, work_tree)
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(  # noqa: S603 - fixed git argv, hardening flags, explicit dirs
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                env=dict(env), cwd="/", close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not run git: {exc}", code="git_failed",
                               operation=operation) from exc
        if proc.stdout is None:  # pragma: no cover - stdout=PIPE above
            raise RuntimeError("git stdout pipe missing")
        total, over = 0, False
        try:
            fd = proc.stdout.fileno()
            while chunk := os.read(fd, _STREAM_CHUNK):
                total += len(chunk)
                if limit is not None and total > limit:
                    over = True
                    break
                sink.write(chunk)
        except BaseException:
            proc.kill()  # the sink failed: nothing more is wanted
            raise
        finally:
            if over:
                proc.kill()  # at the limit: git stops now, not after writing the rest
            proc.stdout.close()
            code = proc.wait()
        if over:
            return None
        if code != 0:
            errors.seek(0)
            raise _git_failed(args, git_dir, code, errors.read(4096), operation)
    return total


def spawn_git(args: Sequence[str], *, git_dir: Path, env: Mapping[str, str],
              stderr: BinaryIO, operation: str = "git") -> subprocess.Popen[bytes]:
    """Start one hardened git command (as :func:`run_git`) with stdin and stdout as pipes,
    for a conversation (``cat-file --batch``, ``mktree --batch``); the caller closes
    stdin and waits for it. ``stderr`` receives its error output."""
    argv = _argv(args, git_dir, None)
    try:
        return subprocess.Popen(  # noqa: S603 - fixed git argv, hardening flags, explicit dirs
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env=dict(env), cwd="/", close_fds=True,
        )
    except OSError as exc:
        raise SandboxError(f"could not run git: {exc}", code="git_failed",
                           operation=operation) from exc


def _is_harmless(section: str, leaf: str, value: str) -> bool:
    allowed = _HARMLESS_VALUES.get((section, leaf))
    return allowed is not None and value.strip().lower() in allowed


def unsafe_config_keys(git_dir: Path) -> list[UnsafeKey]:
    """Every entry of the repository's own configuration that would run a program.

    Reads with system and global configuration off and without following
    includes (an ``include.path`` is itself reported).
    """
    done = run_git(
        ["config", "--list", "-z", "--show-origin", "--no-includes"],
        git_dir=git_dir, operation="check_git_config",
    )
    found: list[UnsafeKey] = []
    fields = done.stdout.split(b"\0")
    for origin_raw, entry in zip(fields[0::2], fields[1::2], strict=False):
        key_raw, _, value_raw = entry.partition(b"\n")
        key = key_raw.decode("utf-8", "replace")
        value = value_raw.decode("utf-8", "replace")
        section, _, rest = key.partition(".")
        leaf = rest.rpartition(".")[2]
        pair = (section.lower(), leaf.lower())
        executable = pair in _EXECUTABLE_KEYS or pair[0] in _EXECUTABLE_SECTIONS
        if executable and not _is_harmless(*pair, value):
            origin = origin_raw.decode("utf-8", "replace")
            found.append(UnsafeKey(key=key, value=value, origin=origin))
    return found


def check_repository_config(git_dir: Path) -> None:
    """Raise :class:`UnsafeRepository` when the local configuration would run a program."""
    unsafe = unsafe_config_keys(git_dir)
    if unsafe:
        keys = ", ".join(sorted({entry.key for entry in unsafe}))
        raise UnsafeRepository(
            f"the repository's git configuration names programs git would run: {keys}",
            code="unsafe_git_config",
            operation="check_git_config",
            context={
                "git_dir": git_dir,
                "keys": keys,
                "origins": ", ".join(sorted({entry.origin for entry in unsafe})),
            },
            hint=(
                "corral runs no repository-configured program on the host (hooks, fsmonitor, "
                "filters, diff/merge drivers, pagers, credential helpers, includes); remove "
                "these keys (git config --unset <key>) or run from a clean clone"
            ),
        )

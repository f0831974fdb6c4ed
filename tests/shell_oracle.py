"""The ground truth for command patterns: what a real shell runs for a line.

:class:`ShellOracle` runs command lines under ``bash -c`` (5.2) or ``sh -c``
(dash, what every sandbox backend runs commands with) and records every
command the shell would run, with its argv, without running any of them:

* the shell runs inside bubblewrap with nothing but itself: no network, no
  ``/usr/bin`` (only the shared libraries), an empty tmpfs as its working
  directory, a clean environment with ``PATH=/nonexistent``;
* bash: every builtin but ``printf`` and ``return`` (which the recorder
  uses) is disabled (``enable -n``), so builtins and programs alike end in
  ``command_not_found_handle``, which records the argv; a DEBUG trap
  (inherited everywhere with ``set -T``) records every simple command bash
  executes, so something that ran without being looked up (an assignment, a
  function call, ``[[``, ``printf``) shows as a DEBUG record without an argv
  record;
* dash: every word of the test vocabulary is a recorder program on ``PATH``,
  every regular builtin is shadowed by a recording function, and a name that
  is not found is reported from dash's "not found" message; special builtins
  (``eval``, ``exec``, ``:``, ...) cannot be shadowed in dash and run for
  real, in the empty sandbox.

Every recorded command succeeds unless one of its arguments is ``HEAD``, so
both sides of ``&&`` and ``||`` run across lines. Many lines run per sandbox
(one shell each, with a timeout).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.timescale import scaled

__all__ = ["OracleRun", "ShellOracle", "render_argv"]

_DASH_REGULAR_BUILTINS = ("echo", "printf", "test", "true", "false", "cd", "pwd", "read",
                          "kill", "type", "command", "alias", "unalias", "umask", "ulimit",
                          "hash", "getopts", "wait", "jobs", "fg", "bg")
_BASH_PRELUDE = r"""
FUNCNEST=64
command_not_found_handle() {
  printf '%s\0' C "$#" "$@" >> "$ORACLE_OUT.$BASHPID"; [[ " $* " != *" HEAD "* ]]
}
set -T
trap '[[ ${FUNCNAME[0]-} == command_not_found_handle ]] ||
  printf "%s\0" D "$BASH_COMMAND" >> "$ORACLE_OUT.$BASHPID"' DEBUG
"""
#: Left enabled for the recorder itself; a line that runs them shows as unrecorded.
_BASH_KEPT = ("printf", "return")
_DRIVER = r"""
cd /scratch || exit 90
: > f; : > list  # files the lines read from, so an input redirection does not fail
IFS= read -r -d '' prelude < /io/prelude.sh
for f in /io/lines/*; do
  n=${f##*/}
  IFS= read -r -d '' line < "$f"
  if [ "$ORACLE_SHELL" = bash ]; then
    ORACLE_OUT=/io/out/$n BASH_ENV=/io/prelude PATH=/nonexistent \
      /oracle/timeout -s KILL 5 /oracle/bash --norc --noprofile -c "$line" \
      </dev/null >/dev/null 2>/io/err/$n
  else
    ORACLE_OUT=/io/out/$n PATH=/io/bin \
      /oracle/timeout -s KILL 5 /oracle/dash -c "$prelude$line" \
      </dev/null >/dev/null 2>/io/err/$n
  fi
  echo "$?" > /io/status/$n
done
"""
_NOT_FOUND = re.compile(r"^\S*dash: \d+: (.*): not found$", re.MULTILINE)
#: DEBUG records of commands that look nothing up: a ``case`` header, redirections alone.
#: And the prelude's own ``enable -n``.
_NO_LOOKUP = re.compile(r"case |\d*[<>&]|enable -n ")
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


@dataclass
class OracleRun:
    """What the shell did with one line."""

    line: str
    commands: list[tuple[str, ...]] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)
    status: int = 0
    stderr: str = ""

    def rendered(self) -> list[str]:
        """Each recorded command as one string, words quoted as the policy renders them."""
        return [render_argv(argv) for argv in self.commands]


def render_argv(argv: tuple[str, ...]) -> str:
    """Words joined by spaces, each single-quoted unless it is plainly safe."""
    return " ".join(w if _SAFE.fullmatch(w) else "'" + w.replace("'", "'\\''") + "'"
                    for w in argv)


class ShellOracle:
    """Runs lines under ``shell`` (``"bash"`` or ``"sh"``) in an empty bubblewrap sandbox."""

    def __init__(self, shell: str, *, vocabulary: tuple[str, ...]) -> None:
        if shell not in ("bash", "sh"):
            raise ValueError(shell)
        self.shell = shell
        self.vocabulary = vocabulary
        self.binaries = {
            "bash": _which("bash"), "dash": _which("dash"), "rec": _which("printf"),
            "timeout": _which("timeout"), "driver": _which("bash"), "false": _which("false"),
        }

    def run(self, lines: list[str]) -> list[OracleRun]:
        """Run every line; return what each ran, in order."""
        with tempfile.TemporaryDirectory(prefix="corral-oracle-") as tmp:
            io = Path(tmp)
            for sub in ("lines", "out", "err", "status", "bin"):
                (io / sub).mkdir()
            for index, line in enumerate(lines):
                (io / "lines" / f"{index:06d}").write_bytes(line.encode() + b"\0")
            (io / "prelude").write_text(_BASH_PRELUDE + self._disable_builtins())
            (io / "prelude.sh").write_text(_dash_prelude() + "\0")
            (io / "driver").write_text(_DRIVER)
            for name in self.vocabulary:
                if name in _DASH_REGULAR_BUILTINS or "/" in name:
                    continue
                script = io / "bin" / name
                script.write_text('#!/oracle/dash\n/oracle/rec \'%s\\0\' C "$(($# + 1))" '
                                  '"${0##*/}" "$@" >> "$ORACLE_OUT"\n'
                                  'case " $* " in *" HEAD "*) exit 1;; esac\n')
                script.chmod(0o755)
            io.chmod(0o777)
            self._sandbox(io)
            return [self._result(io, index, line) for index, line in enumerate(lines)]

    def _disable_builtins(self) -> str:
        listing = subprocess.run(
            [self.binaries["bash"], "--norc", "--noprofile", "-c", "compgen -b"],
            capture_output=True, text=True, check=True, timeout=scaled(60)).stdout.split()
        names = [name for name in listing if name not in _BASH_KEPT]
        return "enable -n " + " ".join(names) + "\n"

    def _sandbox(self, io: Path) -> None:
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--cap-drop", "ALL", "--ro-bind", "/usr/lib", "/usr/lib",
                "--symlink", "usr/lib", "/lib", "--proc", "/proc", "--dev", "/dev",
                "--tmpfs", "/scratch", "--bind", str(io), "/io",
                "--setenv", "ORACLE_SHELL", self.shell]
        if Path("/usr/lib64").is_dir():
            args += ["--ro-bind", "/usr/lib64", "/usr/lib64", "--symlink", "usr/lib64", "/lib64"]
        if Path("/etc/ld.so.cache").exists():
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        for name, path in self.binaries.items():
            args += ["--ro-bind", path, f"/oracle/{name}"]
        args += ["/oracle/driver", "/io/driver"]
        subprocess.run(args, check=True, timeout=scaled(600))

    def _result(self, io: Path, index: int, line: str) -> OracleRun:
        name = f"{index:06d}"
        run = OracleRun(line)
        run.status = int((io / "status" / name).read_text().strip() or "0")
        run.stderr = (io / "err" / name).read_text(errors="replace")
        # bash writes one file per process ($BASHPID): its printf is line-buffered, so
        # records with newlines from concurrent processes would interleave in one file.
        fields: list[bytes] = []
        for out in sorted((io / "out").glob(f"{name}*")):
            fields += out.read_bytes().split(b"\0")[:-1]
        debug: list[str] = []
        position = 0
        while position < len(fields):
            kind = fields[position].decode()
            if kind == "D":
                debug.append(fields[position + 1].decode(errors="replace"))
                position += 2
            else:
                count = int(fields[position + 1])
                argv = tuple(f.decode(errors="replace")
                             for f in fields[position + 2:position + 2 + count])
                run.commands.append(argv)
                position += 2 + count
        if self.shell == "bash":
            debug = [d for d in debug if not _NO_LOOKUP.match(d)]
            # Every simple command that was looked up left a DEBUG record and an argv
            # record; DEBUG records beyond that ran without a lookup.
            if len(debug) > len(run.commands):
                run.unrecorded.extend(debug)
        else:
            run.unrecorded.extend(_NOT_FOUND.findall(run.stderr))
        return run


def _dash_prelude() -> str:
    functions = [f'{name}() {{ /oracle/rec \'%s\\0\' C "$(($# + 1))" {name} "$@" '
                 f'>> "$ORACLE_OUT"; case " $* " in *" HEAD "*) return 1;; esac; }}'
                 for name in _DASH_REGULAR_BUILTINS]
    return "\n".join(functions) + "\n"


def _which(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(name)
    return str(Path(path).resolve())

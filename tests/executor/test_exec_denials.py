"""A deny on a whole program is a boundary: the program is not there to run (issue 28).

Under ``disallowedTools: Bash(rm:*)`` the shell reader decides each line first, and
fails closed on what it cannot read; then, inside the child's sandbox (bubblewrap and
docker), ``rm`` itself is covered by a stand-in that refuses (:mod:`sandbox.denials`),
so a spelling the reader let through still deletes nothing. Each layer is tried alone
(the sandbox with no reader in front, the reader's tables in tests/test_shell_patterns.py)
and together: the ten spellings the last review ran, then 200 generated ones (wrappers x
quoting x routes to a shell), each first shown by the real shells to delete its victim
where nothing is denied.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from exec_support import CONFIGS, LIMITS, Runner, git

from executor.ledger import RunStatus
from policies.contract import SandboxMode
from policies.permissions import Action, PermissionPolicy, PermissionRule, denied_programs
from sandbox.base import BaseSandbox
from sandbox.factory import open_sandbox
from tests.timescale import scaled

BACKENDS = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
            pytest.param("docker", id="docker", marks=pytest.mark.docker)]

#: The spellings the attack review ran under ``Bash(rm:*)`` (issue 28), on victim N.
REVIEWED = [
    "env --split-string='rm -f victims/{n}'", "env -iS'rm -f victims/{n}'",
    "script -qc 'rm -f victims/{n}' /dev/null", "{ echo rm -f victims/{n}; } | sh",
    "(echo rm -f victims/{n}) | sh", "sh /dev/fd/0 <<E\nrm -f victims/{n}\nE",
    "sh /proc/self/fd/0 <<E\nrm -f victims/{n}\nE",
    "env 'BASH_FUNC_f%%=() { rm -f victims/{n}; }' bash -c f",
    "bash -c 'hash -p /bin/rm f; f -f victims/{n}'", "PS4='$(rm -f victims/{n})' bash -xc :",
    "echo $(( $(rm -f victims/{n}) ))", "/usr/bin/rm -f victims/{n}",
    "cp /usr/bin/rm ./x{n} && ./x{n} -f victims/{n}",
]

_NAMES = ["rm", '"rm"', "\\rm", 'r""m', "/bin/rm", "/usr/bin/rm", "/usr/bin/../bin/rm"]
_WRAPPERS = ["", "env ", "nice ", "nohup ", "command ", "timeout 5 ", "setsid -w ",
             "stdbuf -o0 ", "env -i PATH=/usr/bin:/bin "]
#: How a command line reaches a shell: {c} is the command, {q} the same inside single quotes.
_ROUTES = [
    "{c}", "sh -c '{q}'", "bash -c '{q}'", "echo '{q}' | sh", "printf '%s\\n' '{q}' | bash",
    "sh <<'E'\n{c}\nE", "sh /dev/fd/0 <<'E'\n{c}\nE", "bash /dev/stdin <<'E'\n{c}\nE",
    "sh /proc/self/fd/0 <<'E'\n{c}\nE", "env -S'{q}'", "script -qc '{q}' /dev/null",
    "bash -c 'f() { {q}; }; f'", "env 'BASH_FUNC_g%%=() { {q}; }' bash -c g",
    "PS4='$({q})' bash -xc :", "x='{q}'; eval \"$x\"", "{ {c}; }", "( {c} )",
    "true && {c}", "sh -c '{q}' </dev/null",
]


def _generated() -> list[str]:
    """Every wrapper x name x route, with ``{n}`` for its victim (single quotes only where
    the route does not quote the command itself)."""
    out = []
    for wrapper, name, route in itertools.product(_WRAPPERS, _NAMES, _ROUTES):
        command = f"{wrapper}{name} -f victims/{{n}}"
        out.append(route.replace("{q}", command.replace("'", "")).replace("{c}", command))
    return out


def _project(repo: Path, count: int) -> None:
    victims = repo / "victims"
    victims.mkdir()
    for index in range(count):
        (victims / str(index)).write_text(f"victim {index}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "victims")


def _open(backend: str, repo: Path, state: Path, denied: dict[str, str]) -> BaseSandbox:
    return open_sandbox(CONFIGS[backend](limits=LIMITS), repo=repo, mode=SandboxMode.WORKTREE,
                        state_root=state, denied=denied)


def _gone(sandbox: BaseSandbox, lines: list[str]) -> list[int]:
    """Run each line (with its own victim) in ``sandbox``; the victims gone after."""
    for index, line in enumerate(lines):
        sandbox.exec(["sh", "-c", line.replace("{n}", str(index))], timeout=scaled(30))
    listing = sandbox.exec(["sh", "-c", "ls victims"]).stdout.decode().split()
    return [index for index in range(len(lines)) if str(index) not in listing]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_sandbox_alone_refuses_a_denied_program(repo: Path, tmp_path: Path,
                                                    backend: str) -> None:
    """No reader in front: every spelling reaches the sandbox, and none deletes its victim;
    without the deny the same lines delete every one (the shells agree they are rm)."""
    _project(repo, len(REVIEWED))
    plain = _open(backend, repo, tmp_path / "state", {})
    try:
        real = _gone(plain, REVIEWED)  # the oracle; bash as root ignores an inherited PS4
        assert len(real) >= len(REVIEWED) - 1, real
    finally:
        plain.teardown(discard=True)
    denied = _open(backend, repo, tmp_path / "state", {"rm": "rm *"})
    try:
        assert [d.targets != () for d in denied.denials] == [True], denied.denials
        assert _gone(denied, REVIEWED) == []
        said = denied.exec(["sh", "-c", "rm -f victims/0"])
        assert said.exit_code == 126 and b"rm is denied to this agent" in said.stderr
        # The rest of the tool chain still works.
        assert denied.exec(["sh", "-c", "git status --short && python3 -c 'print(7)'"]).ok
    finally:
        denied.teardown(discard=True)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_what_corral_runs_itself_stays_a_policy_and_says_so(repo: Path, tmp_path: Path,
                                                            backend: str) -> None:
    sandbox = _open(backend, repo, tmp_path / "state", {"sh": "sh *", "python3": "python3"})
    try:
        assert all(d.kept and not d.targets for d in sandbox.denials), sandbox.denials
        assert sandbox.exec(["sh", "-c", "echo still"]).stdout == b"still\n"
    finally:
        sandbox.teardown(discard=True)


def test_a_hostile_program_name_never_reaches_the_stand_in(tmp_path: Path) -> None:
    """The name is written into a script: one that is not a plain file name is dropped."""
    from sandbox.denials import host_denials
    assert [d.name for d in host_denials({'rm";reboot;"': "x", "../../bin/rm": "y",
                                          "rm": "rm *"})] == ["rm"]


def test_which_denies_remove_a_program() -> None:
    def layer(*rules: tuple[str | None, Action]) -> PermissionPolicy:
        return PermissionPolicy(rules=tuple(PermissionRule(tool="shell", pattern=p, action=a)
                                            for p, a in rules))
    deny, allow = Action.DENY, Action.ALLOW
    assert denied_programs([layer(("rm *", deny), ("curl", deny))]) == {
        "rm": "rm *", "curl": "curl"}
    assert denied_programs([layer(("git push *", deny), ("r? *", deny))]) == {}  # arguments
    assert denied_programs([layer(("rm *", deny), ("rm -i *", allow))]) == {}  # re-allowed
    assert denied_programs([layer(("rm *", deny), (None, allow))]) == {}  # last match wins
    assert denied_programs([layer(("rm *", deny), ("git *", allow))]) == {"rm": "rm *"}
    assert denied_programs([layer(("rm *", allow)), layer(("rm *", deny))]) == {"rm": "rm *"}


def _claude(repo: Path, fields: str) -> None:
    path = repo / ".claude" / "agents" / "cleaner.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: cleaner\ndescription: test agent\n{fields}\n---\nGo.\n")


def _turns(lines: list[str], per_turn: int = 25) -> list[dict[str, object]]:
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": line}}
                        for line in lines[start:start + per_turn]]}
        for start in range(0, len(lines), per_turn)]
    return [*turns, {"text": "done"}]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_200_spellings_of_rm_delete_nothing(run: Runner, repo: Path, tmp_path: Path,
                                            backend: str) -> None:
    """200 generated spellings, each shown by the real shells to delete its victim where
    nothing is denied; under ``Bash(rm:*)`` a real child runs them all and none deletes."""
    candidates = _generated()
    random.Random(28).shuffle(candidates)  # noqa: S311 - a fixed sample, not a secret
    candidates = candidates[:260]
    _project(repo, len(candidates))
    plain = _open(backend, repo, tmp_path / "oracle", {})
    try:
        real = set(_gone(plain, candidates))
    finally:
        plain.teardown(discard=True)
    lines = [line.replace("{n}", str(index)) for index, line in enumerate(candidates)
             if index in real][:200]
    assert len(lines) == 200, f"only {len(real)} of {len(candidates)} spellings delete"
    _claude(repo, "tools: Read, Bash\ndisallowedTools: Bash(rm:*)")
    # An interpreter is beyond any reader (it is allowed), but the rm it starts is the stand-in.
    spawn = "python3 -c \"import subprocess; subprocess.run(['rm', '-f', 'victims/0'])\""
    record = run("cleaner", _turns([*lines, spawn, "touch ok"]))
    assert record.status is RunStatus.COMPLETED, record.error
    assert [c["path"] for c in record.changed_files] == ["ok"]  # every victim is there
    assert [a["decision"] != "denied" for a in record.audit][-2:] == [True, True]
    assert "rm is denied to this agent" in str(record.audit[-2])


def _evil_repository(root: Path) -> None:
    """A bare-layout repository the child writes with its file tools (``.git`` itself is
    refused): git would discover it from ``evil/`` and run its ``core.fsmonitor``."""
    evil = root / "evil"
    for sub in ("objects/info", "objects/pack", "refs/heads"):
        (evil / sub).mkdir(parents=True, exist_ok=True)
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
        "\tfsmonitor = \"rm -rf victims; false\"\n\tpager = rm -rf victims\n")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_repository_the_child_made_runs_nothing(repo: Path, tmp_path: Path,
                                                  backend: str) -> None:
    """git in the sandbox never discovers a bare repository written in the workspace, so its
    config runs nothing; with corral's git variables removed, the same call deletes."""
    _project(repo, 1)
    sandbox = _open(backend, repo, tmp_path / "state", {})
    try:
        _evil_repository(sandbox.root)
        # safe.directory: on docker the files are another uid's; ownership is not the defence.
        done = sandbox.exec(["sh", "-c", "git -c safe.directory='*' status; "
                             "git -c safe.directory='*' -p log -1; exit 0"], cwd="evil")
        assert (sandbox.root / "victims" / "0").is_file(), done
        found = sandbox.exec(["sh", "-c", "git -c safe.directory='*' rev-parse "
                              "--absolute-git-dir"], cwd="evil")
        assert not found.stdout.decode().strip().endswith("/evil"), found  # never discovered
        strip = ("env -u GIT_CONFIG_COUNT -u GIT_CEILING_DIRECTORIES -u GIT_PAGER "
                 "git -c safe.directory='*' status")
        sandbox.exec(["sh", "-c", strip], cwd="evil")
        assert not (sandbox.root / "victims").exists()  # the oracle: the attack is real
    finally:
        sandbox.teardown(discard=True)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_an_allowed_git_status_never_runs_in_a_repository_the_child_wrote(
        run: Runner, repo: Path, backend: str) -> None:
    """Issue 28, hole 2: with ``Bash(git status:*)`` and Write, a child writes a bare-layout
    repository whose config names a command, then calls the allowed ``git status`` in it.
    The call is refused (a pattern-allowed call never runs where the child made a git
    directory); the same call at the workspace root runs, and no victim is touched."""
    _project(repo, 1)
    _claude(repo, "tools: Read, Write, Bash(git status:*)")
    config = ("[core]\n\tbare = false\n\tworktree = ..\n"
              "\tfsmonitor = \"rm -rf victims; false\"\n")
    writes = [{"name": "write_file", "arguments": {"path": path, "content": content}}
              for path, content in (("evil/HEAD", "ref: refs/heads/main\n"),
                                    ("evil/config", config), ("evil/objects/info/x", ""),
                                    ("evil/refs/heads/x", ""))]
    calls = [{"name": "shell", "arguments": {"command": "git status", "cwd": cwd}}
             for cwd in ("evil", "evil/objects", ".")]
    record = run("cleaner", [{"tool_calls": writes}, {"tool_calls": calls}, {"text": "done"}])
    assert record.status is RunStatus.COMPLETED, record.error
    decisions = [a["decision"] for a in record.audit]
    assert decisions[4:] == ["denied", "denied", "allowed"], record.audit
    assert "holds a git directory" in str(record.audit[4])
    assert not [c for c in record.changed_files if c["path"].startswith("victims")]

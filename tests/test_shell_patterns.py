"""Command patterns read by a real shell parser: the attacks, and a table of regressions.

Every expected decision is also checked against the shell itself (bash and
dash in an empty bubblewrap sandbox, :mod:`tests.shell_oracle`): a line the
policy allows runs only what the pattern names, and a line the table says
runs a hidden command really runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.loader import Environment, discover
from policies.permissions import (
    Action,
    PermissionMode,
    PermissionPolicy,
    PermissionRule,
    glob_matches,
)
from policies.shellsyntax import ShellSyntaxError, parse
from policies.shellwords import read_command_line
from tests.backends import require_backend
from tests.shell_oracle import ShellOracle

#: The reported attack: the splitter read ``#'`` as opening a quote, bash reads a comment.
ATTACK = "git diff #'\nid; echo x > f\n'"
DENY_ATTACK = "git diff #'\nrm -rf x\n'"


def _policy(pattern: str, action: Action, mode: PermissionMode) -> PermissionPolicy:
    return PermissionPolicy(mode=mode, rules=(PermissionRule(tool="shell", pattern=pattern,
                                                             action=action),))


GIT_DIFF = _policy("git diff *", Action.ALLOW, PermissionMode.STRICT)
NO_RM = _policy("rm *", Action.DENY, PermissionMode.STANDARD)


def _claude_agent(tmp_path: Path, tools: str) -> PermissionPolicy:
    root = tmp_path / "repo"
    (root / ".claude/agents").mkdir(parents=True)
    (root / ".claude/agents/differ.md").write_text(
        f"---\nname: differ\ndescription: reads diffs\ntools: {tools}\n---\nDiff.\n")
    env = Environment(home=tmp_path / "home", xdg_config=tmp_path / "home/.config",
                      pi_dir=tmp_path / "home/.pi/agent")
    contract = discover(root, trust_project=True, personal=False, env=env).get("differ")
    assert contract is not None
    return contract.permission


# --- the attacks ----------------------------------------------------------------------------

def test_attack_comment_quote_does_not_allow_a_hidden_command(tmp_path: Path) -> None:
    """``Bash(git diff:*)`` allowed ``git diff #'<nl>id; echo x > f<nl>'``, which runs ``id``
    and writes ``f``: now no pattern allows it, and the agent's own deny-all decides."""
    policy = _claude_agent(tmp_path, "Read, Bash(git diff:*)")
    assert policy.decide("shell", "git diff HEAD") is Action.ALLOW
    assert policy.decide("shell", ATTACK) is Action.DENY
    assert GIT_DIFF.decide("shell", ATTACK) is Action.DENY  # strict: unresolved


def test_attack_comment_quote_does_not_hide_a_denied_command(tmp_path: Path) -> None:
    """``Bash(rm:*)`` as a deny was bypassed the same way."""
    policy = _claude_agent(tmp_path, "Read, Bash")
    assert policy.decide("shell", DENY_ATTACK) is Action.ALLOW  # no deny rule yet
    root = tmp_path / "repo"
    (root / ".claude/settings.json").write_text("{}")
    assert NO_RM.decide("shell", DENY_ATTACK) is Action.DENY
    assert NO_RM.decide("shell", "git diff #x\nrm -rf x") is Action.DENY


def test_the_attacks_really_run_the_hidden_commands() -> None:
    """The premise, from the shells themselves: both lines run what they hide."""
    require_backend("bubblewrap")
    for shell in ("bash", "sh"):
        runs = ShellOracle(shell, vocabulary=("git", "id", "echo", "rm")).run(
            [ATTACK, DENY_ATTACK])
        assert ("id",) in runs[0].commands and ("echo", "x") in runs[0].commands
        assert ("rm", "-rf", "x") in runs[1].commands


# --- the table --------------------------------------------------------------------------------

#: (line, allowed by "git diff *", denied by "rm *")
TABLE = [
    # comments: '#' starts one only at the start of a word
    ("git diff #x", True, False),
    ("git diff # rm -rf x", True, False),
    ("git diff a#b", True, False),
    ("git diff '#' ; id", False, False),
    ('git diff "#" ; id', False, False),
    ("git diff \\# ; rm x", False, True),
    ("git diff #'\nid\n'", False, False),
    ('git diff #"\nrm x\n"', False, True),
    ("git diff;#x\nrm x", False, True),
    ("git diff # note \\\nrm x", False, True),  # a comment ends at the newline, '\' or not
    # continuations and newlines
    ("git diff\\\n; id", False, False),
    ("git \\\ndiff HEAD", True, False),
    ("git diff\nid", False, False),
    ("git diff\n\ngit diff HEAD\n", True, False),
    ("git diff 'a\nb'", True, False),
    ("git diff \"a\nb\" | rm x", False, True),
    # quoting
    ("git diff $'\\n'id", True, False),
    ("git diff $'\\'' ; id ; '", False, False),  # bash: id runs; sh: one quoted word
    ("git diff $'\\'' ; rm x ; '", False, True),
    ('git diff $"x"', True, False),
    ("git diff 'a;b' \"c && d\"", True, False),
    ("git diff \\'; rm x; \\'", False, True),
    ("git diff \"it's\" ; rm x", False, True),
    ("git diff 'unterminated", False, False),
    ("r\\m x", False, True),
    ("'rm' x", False, True),
    ('"r"m -rf x', False, True),
    # operators
    ("git diff && git diff HEAD || git diff --stat", True, False),
    ("git diff | git diff HEAD", True, False),
    ("git diff & rm x", False, True),
    ("git diff |& rm x", False, True),
    ("git diff &>/dev/null", True, False),  # bash: a redirect; sh: '&' then '>/dev/null'
    ("git diff &>f", False, False),
    ("git diff 2>/dev/null >&2 2>&1", True, False),
    ("git diff > ~/.bashrc", False, False),
    ("git diff >> f", False, False),
    ("git diff <f", True, False),
    ("(git diff) && { git diff HEAD; }", True, False),
    ("( rm x )", False, True),
    ("{ rm x; }", False, True),
    ("! git diff", True, False),
    ("if git diff; then git diff HEAD; fi", True, False),
    ("if git diff; then rm x; fi", False, True),
    ("while git diff; do rm x; done", False, True),
    ("case a in a) rm x;; esac", False, True),
    ("for i in a; do git diff; done", False, False),
    ("for PATH in /tmp; do git diff; done", False, False),
    # heredocs
    ("git diff <<'E'\n$(id)\nE", True, False),
    ("git diff <<E\n$(id)\nE", False, False),
    ("git diff <<E\n$(rm x)\nE", False, True),
    ("git diff <<E\nrm x\nE", True, False),  # a heredoc fed to git is data
    ("sh <<E\nrm x\nE", False, True),  # ... and fed to a shell, commands
    ("bash <<'E'\nrm -rf x\nE", False, True),
    ("git diff <<E; rm x\nbody\nE", False, True),
    ("git diff <<E\nbody\nE\nrm x", False, True),
    ("git diff <<-E\n\tbody\n\tE\ngit diff HEAD", True, False),
    ("git diff <<E\nnever closed", False, False),
    ("git diff <<E #'\nbody\nE\n", True, False),
    ("cat <<<'rm x' | sh", False, True),
    # substitutions and expansions
    ("git diff $(id)", False, False),
    ("git diff `id`", False, False),
    ("git diff \"$(rm x)\"", False, True),
    ("echo `rm x`", False, True),
    ("git diff <(rm x)", False, True),
    ("git diff ${x:-$(rm x)}", False, True),
    ("git diff $HOME \"$HOME\" ${HOME}", True, False),
    ("git diff ${HOME%/*}", False, False),
    ("git diff $((1+2))", False, False),
    ("$X diff", False, True),  # $X may be rm: every deny pattern matches
    ("gi? diff", False, True),
    ("/bin/r? -rf x", False, True),
    ("{rm,-rf,x}", False, True),
    ("git diff {a,b} *.py", True, False),
    ("~/git diff", False, False),
    # what a line defines or assigns changes what runs
    ("git(){ id; }; git diff", False, False),
    ("f(){ rm x; }; f", False, True),
    ("PATH=/tmp/evil git diff", False, False),
    ("x=1; git diff", False, False),
    ("GIT_EXTERNAL_DIFF=/tmp/x git diff", False, True),  # a variable that runs a program
    # wrappers and nested shells
    ("sudo rm -rf x", False, True),
    ("sudo -u root rm -rf x", False, True),
    ("env A=b nohup timeout 5 rm x", False, True),
    ("xargs -n1 rm < list", False, True),
    ("find . -name '*.o' -exec rm {} \\;", False, True),
    ("sh -c 'rm x'", False, True),
    ("bash -lc \"git diff; rm x\"", False, True),
    ("eval 'rm x'", False, True),
    ("eval git diff", False, False),
    ("exec git diff", False, False),
    ("command git diff", False, False),
    ("source x", False, False),
    (". ./x", False, False),
    ("trap 'rm x' EXIT; git diff", False, True),
    ("echo 'rm -rf x' | sh", False, True),
    ("printf 'rm x' | bash -s", False, True),
    ("env -S 'rm x'", False, True),
    # bash-only syntax read differently by sh: never allowed
    ("[[ -n x ]] && git diff", False, False),
    ("((1)) && git diff", False, False),
    ("function f { rm x; }", False, True),
    ("coproc rm x", False, True),
    ("time rm x", False, True),
    # what must stay allowed and not denied
    ("git diff", True, False),
    ("git diff -- src/app.py", True, False),
    ("git diff HEAD~1 --stat | git diff --name-only", True, False),
    ("echo rm x", False, False),
    ("git commit -m 'rm x'", False, False),
    ("git diff 'rm x'", True, False),
    ("", False, False),
    ("# only a comment", False, False),
]


@pytest.mark.parametrize(("line", "allowed", "denied"), TABLE, ids=[repr(t[0]) for t in TABLE])
def test_table(line: str, allowed: bool, denied: bool) -> None:
    decision = GIT_DIFF.decide("shell", line)
    assert (decision is Action.ALLOW) is allowed, (decision, read_command_line(line).reasons)
    assert (NO_RM.decide("shell", line) is Action.DENY) is denied


@pytest.fixture(scope="module", params=["bash", "sh"])
def oracle(request: pytest.FixtureRequest) -> ShellOracle:
    require_backend("bubblewrap")
    return ShellOracle(str(request.param), vocabulary=(
        "git", "id", "rm", "cat", "sudo", "env", "nohup", "timeout", "xargs", "find", "sh",
        "bash", "printf", "echo", "source", "gi?", "f", "coproc", "time", "[[", "~"))


def test_the_table_agrees_with_the_shells(oracle: ShellOracle) -> None:
    """Allowed lines run only ``git diff ...``; a line whose shell ran ``rm`` is denied."""
    runs = oracle.run([line for line, _, _ in TABLE])
    ran_rm = 0
    for run, (line, allowed, denied) in zip(runs, TABLE, strict=True):
        if allowed:
            assert run.commands, line
            assert all(glob_matches("git diff *", c) for c in run.rendered()), (line, run)
            assert not run.unrecorded, (line, run)
        if any(c[0].rsplit("/", 1)[-1] == "rm" for c in run.commands):
            ran_rm += 1
            assert denied, (line, run.commands)
    assert ran_rm >= 20  # the table is not vacuous


# --- the parser's refusals and the reading ----------------------------------------------------

@pytest.mark.parametrize("line", [
    "echo 'x", 'echo "x', "echo `x", "echo $(x", "echo ${x", "(x", "x)", "{ x", "if x; then y",
    "x |", "x &&", "cat <<E", "a[0]=1 x", "x+=1 y", "{fd}>f x", "x=1 if y; then z; fi",
    "echo $[1+2]", "echo ${x-'}'}", "x ;& y", "echo \x00", "f() x", "echo \\",
])
def test_the_parser_refuses_what_it_cannot_read_with_certainty(line: str) -> None:
    with pytest.raises(ShellSyntaxError):
        parse(line, bash=True)
    reading = read_command_line(line)
    assert not reading.certain and reading.reasons and reading.commands == ()


def test_reasons_name_what_and_where() -> None:
    reasons = read_command_line("git diff > out.txt").reasons
    assert reasons[0] == "bash reading: writes a file (> out.txt)"
    reasons = read_command_line("git diff 'oops").reasons
    assert reasons[0].startswith("bash reading: an unterminated single quote (at offset 9)")


def test_dialects_differ_and_both_readings_count() -> None:
    bash = parse("git diff &>f; id", bash=True)
    sh = parse("git diff &>f; id", bash=False)
    assert len(bash.pipelines) == 2 and len(sh.pipelines) == 3
    assert read_command_line("git diff &> /dev/null").commands == ("git diff",)


def test_a_pattern_free_allow_still_allows_what_no_pattern_may() -> None:
    everything = PermissionPolicy(mode=PermissionMode.STRICT, rules=(
        PermissionRule(tool="shell", action=Action.ALLOW),
        PermissionRule(tool="shell", pattern="rm *", action=Action.DENY)))
    assert everything.decide("shell", "echo date 'unterminated") is Action.ALLOW
    # unreadable, with an expansion: any word may run anything, so every deny matches
    assert everything.decide("shell", "echo $(date) 'unterminated") is Action.DENY
    assert everything.decide("shell", "echo $(rm x)") is Action.DENY
    asking = PermissionPolicy(rules=(
        PermissionRule(tool="shell", action=Action.ALLOW),
        PermissionRule(tool="shell", pattern="git push *", action=Action.ASK)))
    assert asking.decide("shell", "sudo git push origin") is Action.ASK
    assert asking.decide("shell", "echo `git push origin`") is Action.ASK
    assert asking.decide("shell", "git status") is Action.ALLOW


def test_hostile_sizes_fail_closed_quickly() -> None:
    """Deep nesting is a refusal, not a crash; a huge unreadable line is denied by any deny
    pattern instead of listing every word sequence."""
    deep = "(" * 5000 + "git diff" + ")" * 5000
    assert GIT_DIFF.decide("shell", deep) is Action.DENY
    huge = "git diff 'unterminated " + "a " * 5000 + "; rm x"
    reading = read_command_line(huge)
    assert not reading.certain and not reading.exhaustive
    assert NO_RM.decide("shell", huge) is Action.DENY
    assert _policy("git push *", Action.ASK, PermissionMode.STANDARD).decide(
        "shell", huge) is Action.ASK
    assert GIT_DIFF.decide("shell", "git diff " + "a " * 5000) is Action.ALLOW  # readable


def test_io_numbers_follow_each_dialect() -> None:
    """dash reads ``10<f`` as the word 10 then ``<f``; bash as a redirection of fd 10."""
    assert read_command_line("git diff 10</dev/null").commands == ("git diff", "git diff 10")
    exact = _policy("git diff", Action.ALLOW, PermissionMode.STRICT)
    assert exact.decide("shell", "git diff 2>/dev/null") is Action.ALLOW
    assert exact.decide("shell", "git diff 10</dev/null") is Action.DENY


def test_bash_locale_strings_show_their_substitutions() -> None:
    """bash runs ``$(..)`` inside ``$".."``; sh reads ``$`` then a double-quoted string."""
    assert GIT_DIFF.decide("shell", 'git diff $"$(id)"') is Action.DENY
    assert NO_RM.decide("shell", 'git diff $"$(rm x)"') is Action.DENY
    assert GIT_DIFF.decide("shell", 'git diff $"plain"') is Action.ALLOW


# --- expansions in what runs (issue 16, item 4) -----------------------------------------------

ASK_RM = _policy("rm *", Action.ASK, PermissionMode.STANDARD)
NO_PUSH = _policy("git push *", Action.DENY, PermissionMode.STANDARD)
NO_CURL = _policy("curl", Action.DENY, PermissionMode.STANDARD)

#: Lines whose command name, or a word that decides what runs, is not a literal the parser can
#: read with certainty: any value may be ``rm`` (or ``sh -c '..'``, which runs anything).
UNCERTAIN = [
    # the command name expands
    "r$()m -f a.txt", "rm${u} -rf src", "x=rm; $x f", "rm$IFS f", 'set -- rm f; "$@"',
    "$'\\x72m' f", "$'rm' f", '$"rm" f', "${x:-rm} f", "${!x} f", "rm$((0)) f", "r`true`m f",
    "$(printf rm) f", '"$(printf rm)" f', "`printf rm` f", "a=r b=m; $a$b f", "$* f", "$1 f",
    '"$x" f', "$0 f", "for c in rm; do $c f; done", "read c; $c f", "cat f | $x f",
    "$SHELL -c 'rm f'", "x=rm && $x f", "x=rm || $x f", "! $x f", "( $x f )", "{ $x f; }",
    "if true; then $x f; fi", "case a in a) $x f;; esac", "echo $($x f)", 'f(){ "$@"; }; f rm x',
    # tilde, globs and braces in the command name
    "HOME=rm; ~ f", "~user f", "r? f", "/bin/r? f", "r[m] f", "* f", "{rm,f}", "{r..r}m f",
    "{{rm,x},f}", "r{m,} f",
    # a wrapper's command, or a word where it reads options, expands
    "exec $x f", "command $x f", "command -p $x f", "builtin $x f", "env $x f", "env -i $x f",
    "env -- $x f", "env A=$x ls", 'env "$x" ls', 'env -"$x" ls', "nice $x f", "nice -n $n ls",
    "nohup $x f", "timeout 5 $x f", "timeout $t ls", 'timeout "$t" ls', "stdbuf -o0 $x f",
    "sudo $x f", 'sudo "$x" ls', "sudo -u $u ls", "time $x f", "busybox $x f",
    "xargs $x < list", "echo f | xargs $x",
    "xargs sh -c < list", "echo rm f | xargs env", "xargs -I{} {} f < list",
    "xargs -i sh -c '{}' < list", "find . -exec $x {} \\;", 'find . -execdir "$x" {} +',
    "fakeroot $x f", "pkexec $x f", "unshare -r $x f", "nsenter -t 1 -m $x f", "chrt 1 $x f",
    "runuser -u u $x f", "systemd-run --user $x f", "parallel {} f ::: rm", "parallel $x ::: f",
    "script -c \"$x\"",
    # text a shell runs expands
    'sh -c "$x"', 'bash -c "$x"', 'sh -c "echo $x"', 'sh -c "$x" sh', "sh $x", 'sh "$x" f',
    "bash -c $'rm f'", 'eval "$x"', "eval $x", 'eval echo "$x"', 'trap "$x" EXIT',
    'alias r="$x"', 'su -c "$x"', 'env -S "$x"', 'watch "$x"', 'echo "$x" | sh',
    "echo $x | bash -s", "sh <<E\n$x\nE", "sh <<E\necho $x\nE", 'sh <<<"$x"', "sh < $x",
    "sh < <(printf 'rm f')", "bash <(printf 'rm f')", ". <(printf 'rm f')", "source $x",
    # a line a reading refuses: every word with an expansion may start a command (dash
    # cannot read <(..), so it counts as one like $(..) and backticks)
    "[[ -n x ]]; $x f", "function g { $x f; }", "[[ x ]]; r`printf ''`m f", "cat <(rm f)",
    "bash -c '[[ 1 ]]; bash <(printf \"r%sm f\" \"\")'",
    # ... and a brace expansion in it makes a name (the oracle found the first: bash runs
    # line 1 before it meets the unclosed group of line 3)
    "{r..r}m x # note\n{ git diff }", "{r,}m x\n{ y }", "r{m,} x\n{ y }",
    "{{r,x}m,y} f\n{ y }", "{r..r}{m..m} x\n{ y }",
]

#: Quoting the parser resolves with certainty, and names it reads through: these are ``rm``,
#: denied by ``rm *`` and by no other pattern.
LITERAL_RM = [
    "'rm' f", '"rm" f', "\\rm f", 'r""m f', "r''m f", "r\\\nm f", "/bin/rm f", "./rm f",
    "~/rm f", "HOME=/bin; ~/rm f", "exec rm f", "command -p rm f", "env -i rm f",
    'env A="$x" rm f', "nice rm f", 'nice -n "$n" rm f', 'sudo -u "$u" rm f',
    "stdbuf -o0 rm f", "xargs rm < list", "find . -exec rm {} \\;", "sh -c 'rm f'",
    "eval rm f", "busybox rm f", 'f(){ rm "$@"; }; f x', "alias r=rm", "trap 'rm f' EXIT",
    "PATH=/x rm f", "rm", "rm $x", "rm -rf *", "sh <<'E'\nrm \"$x\"\nE",
    "x=$(rm f)", "fakeroot rm f", "pkexec rm f", "unshare -r rm f",
    "nsenter -t 1 -m rm f", "firejail rm f", "chrt 1 rm f", "ltrace -o x rm f",
    "valgrind rm f", "systemd-run --user rm f", "setpriv --reuid 1 rm f", "runuser -u u rm f",
]

#: The pattern ``git push *`` tests the word after ``git``: where that word is not certain
#: (an expansion, a glob a file may match, a brace list) the deny matches.
UNCERTAIN_PUSH = [
    "git $x origin", "git pu$()sh origin", "git push$x origin", 'git "$x" origin',
    "git pu?h origin", "git {push,x}", "git {p..p}ush origin", "git $'push' origin", "git $x",
    "git `printf push`", "nice git $x", "xargs git < list", "echo push | xargs git",
    "git push", "git \"push\" origin", "git p\\ush origin", "sudo git push",
]

#: Commands whose deciding words are all literal keep today's matching: no pattern here names
#: what they run.
CERTAIN = [
    "ls -la", "git status", "echo $HOME", "echo \"$x\" > /dev/null", "printf '%s\\n' \"$@\"",
    "cat $f | grep x", "ls *.py", "git add *.py", "[ -f x ] && echo y", 'test -n "$x"',
    "x=$(pwd); echo $x", "for f in *.py; do echo $f; done", 'cd "$dir" && ls',
    "~/bin/tool x", "echo {a,b}", "FOO=$x make", 'env FOO="$x" make', "git status $x",
    "git log --format=$f", "git commit -m \"$msg\"", "git diff {a,b}", "eval 'echo $x'",
    "sh -c 'echo $1' sh", "trap 'echo $x' EXIT", "echo $'\\n'", "echo $((1+2))",
    "sh <<'E'\necho $x\nE", "git -C \"$dir\" status", "timeout 5 ls $x", "xargs -I{} ls {} < f",
    "echo ~", "cat <<E\n$x\nE", "sh ./script.sh", ". ./env.sh", "grep -r \"$pattern\" src",
]


def _matches_every_pattern(line: str) -> None:
    """``line`` is denied by every deny pattern and asked by every ask pattern, and no
    allow pattern may allow it."""
    reading = read_command_line(line)
    assert NO_RM.decide("shell", line) is Action.DENY, reading
    assert ASK_RM.decide("shell", line) is Action.ASK, reading
    assert NO_PUSH.decide("shell", line) is Action.DENY, reading
    assert NO_CURL.decide("shell", line) is Action.DENY, reading
    assert not reading.certain, reading


@pytest.mark.parametrize("line", UNCERTAIN, ids=repr)
def test_an_uncertain_name_matches_every_deny_and_ask_pattern(line: str) -> None:
    _matches_every_pattern(line)


#: Lines whose words reach a program that runs text it receives (a shell reading a pipe or a
#: descriptor, ``env -S`` in any spelling, ``script``, variables a shell or git runs, ``hash
#: -p``, ``git -c``, ...): every deny and ask pattern matches them, as for an unreadable line
#: (issue 28: each review found new spellings of these, so the reader fails closed on them).
TEXT_RUNNERS = [
    "env --split-string='git push'", "env -iS'git push'", "env --sp='git push'",
    "env -vS 'git push'", "env -S'git\\_push'", "script -qc 'git push' /dev/null",
    "script -c 'rm f'", "echo git push | script -q /dev/null", "{ echo git push; } | sh",
    "(echo git push) | sh", "f() { echo git push; }; f | bash",
    "sh /dev/fd/0 <<E\ngit push\nE", "sh /proc/self/fd/0 <<E\ngit push\nE",
    "bash /dev/stdin <<E\ngit push\nE", "sh /dev/fd/3 3<<E\ngit push\nE",
    ". /dev/stdin <<E\ngit push\nE", "env 'BASH_FUNC_f%%=() { git push; }' bash -c f",
    "bash -c 'hash -p /usr/bin/git f; f push'", "PS4='$(git push)' bash -xc :",
    "ENV=/tmp/x sh -i", "BASH_ENV=x bash -c :", "PROMPT_COMMAND='git push' bash -i",
    "env LD_PRELOAD=/tmp/x.so ls", "GIT_SSH_COMMAND='git push' git fetch",
    "setarch x86_64 git push", "linux64 git push", "prlimit --nofile=100 git push",
    "sg root -c 'git push'", "parallel rm ::: f", "echo rm f | sh", "parallel git ::: push",
    "git -c alias.p=push p", "git -c core.pager='git push' log", "git --exec-path=. push",
    "make -f /dev/stdin <<E\nall:\n\tgit push\nE", "make --eval='x:=$(shell git push)'",
]


@pytest.mark.parametrize("line", TEXT_RUNNERS, ids=repr)
def test_a_program_that_runs_text_matches_every_deny_and_ask_pattern(line: str) -> None:
    _matches_every_pattern(line)


#: git's own options before its command do not hide the command from a pattern.
GIT_OPTIONS_PUSH = ["git -C . push", "git --git-dir=.git push", "git --git-dir .git push",
                    "git --no-pager push origin", "git -P --work-tree . push", "git -C x -p push"]


@pytest.mark.parametrize("line", GIT_OPTIONS_PUSH, ids=repr)
def test_git_options_before_the_command_are_read_through(line: str) -> None:
    assert NO_PUSH.decide("shell", line) is Action.DENY, read_command_line(line)
    assert NO_RM.decide("shell", line) is Action.ALLOW, read_command_line(line)


def test_an_arithmetic_expansion_hides_no_substitution() -> None:
    """``$(( $(rm -rf x) ))`` runs rm: the substitution inside arithmetic is read (deleting
    that reading let it through with no test noticing, issue 28)."""
    for line in ("echo $(( $(rm -rf x) ))", "echo $(( `rm -rf x` + 1 ))", ": $(( $(rm x) ))"):
        assert NO_RM.decide("shell", line) is Action.DENY, read_command_line(line)


@pytest.mark.parametrize("line", LITERAL_RM, ids=repr)
def test_quoting_read_with_certainty_is_the_literal_name(line: str) -> None:
    assert NO_RM.decide("shell", line) is Action.DENY, read_command_line(line)
    assert ASK_RM.decide("shell", line) is Action.ASK
    assert NO_PUSH.decide("shell", line) is Action.ALLOW, read_command_line(line)


@pytest.mark.parametrize("line", UNCERTAIN_PUSH, ids=repr)
def test_an_uncertain_word_a_pattern_tests_matches(line: str) -> None:
    assert NO_PUSH.decide("shell", line) is Action.DENY, read_command_line(line)
    assert NO_RM.decide("shell", line) is Action.ALLOW, read_command_line(line)


@pytest.mark.parametrize("line", CERTAIN, ids=repr)
def test_certain_commands_keep_their_matching(line: str) -> None:
    reading = read_command_line(line)
    assert not reading.uncertain, reading.uncertain
    for policy in (NO_RM, ASK_RM, NO_PUSH, NO_CURL):
        assert policy.decide("shell", line) is Action.ALLOW, (policy, reading)


def test_an_allow_never_covers_an_uncertain_name() -> None:
    """Not a pattern that would match the value (``r*``), not one that matches the text
    as written (``$x *``); a pattern-free allow still decides, and a deny beats it."""
    for pattern in ("r*", "$x *", "*", "**"):
        policy = _policy(pattern, Action.ALLOW, PermissionMode.STRICT)
        expected = Action.ALLOW if pattern in ("*", "**") else Action.DENY
        assert policy.decide("shell", "$x f") is expected, pattern
    both = PermissionPolicy(rules=(
        PermissionRule(tool="shell", pattern="ls *", action=Action.ALLOW),
        PermissionRule(tool="shell", pattern="rm *", action=Action.DENY),
        PermissionRule(tool="shell", pattern="ls *", action=Action.ALLOW)))
    assert both.decide("shell", "ls -la") is Action.ALLOW
    assert both.decide("shell", "l$()s -la") is Action.DENY
    assert both.decide("shell", "ls $x") is Action.ALLOW  # the name is certain


def test_the_reading_says_what_is_uncertain() -> None:
    reading = read_command_line("x=rm; $x f")
    assert reading.uncertain and "$x f" in reading.uncertain[0], reading.uncertain
    assert read_command_line('sh -c "$x"').uncertain
    assert not read_command_line("git push $x").uncertain  # an argument: patterns decide

"""What a shell command line runs, read for command patterns.

Command patterns (``git *`` allowed, ``rm *`` denied) are a policy
convenience, not an OS sandbox: the sandbox backends are what confine a
command. The line is read by :mod:`policies.shellsyntax` twice, as bash and
as POSIX sh (``sh -c``, dash, is what every backend runs), and the reading
is deliberately asymmetric:

* an **allow** pattern must match *every* simple command of *both* readings,
  each rendered literally (a wrapper such as ``sudo git`` is not ``git``).
  A line is never allowed by a pattern when either reading fails (a syntax
  error, a construct the reader refuses, an unterminated quote or heredoc),
  or when it hides or changes what runs: command, process or arithmetic
  substitution, ``${..}`` with an operator, an expanding heredoc body, a
  command name that expands (``$x``, a glob, braces, ``~``), variable
  assignments (``PATH=.. git``), a function definition, a ``for`` loop,
  ``eval``/``source``/``.``/``exec``/``trap``/``alias``/a nested shell, or a
  redirection that writes a file (only ``/dev/null`` and descriptor
  duplication are allowed: ``git diff > ~/.bashrc`` is not ``git diff``);
* a **deny** pattern denies the line when it matches *any* candidate: every
  simple command of every reading (in substitutions, function bodies and
  compound commands too), as written, unquoted and literally rendered, with
  wrappers stripped (``sudo``, ``env A=b``, ``nohup``, ``exec``,
  ``timeout 5``, ``xargs``, ...), with its command word reduced to its
  basename (``/bin/rm``) or brace-expanded (``{rm,-rf,x}``), and recursively
  the text run by ``sh -c``, ``eval``, ``trap``, ``su -c``, ``env -S``,
  ``find -exec``, and a shell's standard input (a heredoc, a here-string or
  the words of the commands piped into it). When a reading fails, the line
  is also split at every operator character, with and without its quotes,
  and every word sequence of it is a candidate (a line too long to list
  them all matches every deny and ask pattern).

Deny patterns are decided on what *may* run. In a candidate, whatever the
parser cannot read with certainty is a wildcard: an expansion (``$x``,
``${x:-rm}``, ``"$@"``, ``$(..)``, backticks, ``$((..))``, ``$'..'``,
``$".."``, ``<(..)``), a tilde prefix, and a whole word that globs
(``pu?h``) or brace-expands in bash (``{a,b}``, ``{a..b}``). :data:`WILD`
stands for an unquoted one (its value may be split into any number of
words, options and commands included), :data:`QUOTED_WILD` for one inside
quotes (any text within its word). A command is **uncertain**, and listed
in :attr:`ShellReading.uncertain`, when a word that decides what runs holds
one: its name (after wrappers and the directory; ``"$d"/rm`` is still
``rm``, ``$d/rm`` is not), a wrapper's options and operands before the
command (``env $x``, ``nice -n $n``, ``timeout $t``; a quoted value such as
``sudo -u "$u"`` or ``env A="$x"`` is data), what ``xargs`` adds (its
input), a shell's options or script (``sh $x``, ``bash <(..)``, ``.
<(..)``, ``source $x``), or any text run as commands (``sh -c "$x"``,
``eval echo $x``, ``trap "$x"``, a heredoc body or piped words that expand,
input from a file the line does not name). An uncertain command matches
every deny and ask pattern (its value may be ``sh -c '..'``, which runs
anything) and no allow pattern. Elsewhere a wildcard matches whatever the
pattern asks at its place (``git $x`` may be ``git push``): the words a
pattern tests must be certain for a deny not to match. A script file
named literally (``sh ./x.sh``, ``. ./env``, ``sh < f``) is a program like
any other: its content is not read.

A determined writer can still phrase a command no pattern anticipates
(``find -delete``, an interpreter one-liner); deny patterns narrow, the
sandbox confines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from policies.shellsyntax import (
    Compound,
    Expansion,
    FunctionDef,
    Heredoc,
    Literal,
    Pipeline,
    Redirect,
    Script,
    ShellSyntaxError,
    SimpleCommand,
    Word,
    parse,
)

__all__ = ["QUOTED_WILD", "WILD", "ShellReading", "deny_candidates", "read_command_line",
           "shell_segments"]

#: In a deny candidate: an unquoted expansion, a glob or a brace list (any words, or none).
WILD = "\x00"
#: In a deny candidate: an expansion inside quotes, or a tilde prefix (any text, one word).
QUOTED_WILD = "\x01"
_WILDS = frozenset(WILD + QUOTED_WILD)

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish",
                     "csh", "tcsh", "posh", "yash"})
#: Commands that run text the line does not show as commands: never allowed by a pattern.
_HIDING = _SHELLS | {"eval", "source", ".", "exec", "trap", "alias", "unalias", "enable",
                     "builtin", "shopt", "fc", "command"}
#: Wrappers that run their operands as a command: name -> (options taking a value, operands
#: to skip before the command).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-C", "-h", "-p", "-D", "-r", "-t", "-U", "-T", "--user",
                        "--group", "--chdir", "--prompt", "--host", "--role", "--type"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "-C", "--unset", "--chdir"}), 0),
    "nohup": (frozenset(), 0), "setsid": (frozenset(), 0), "unbuffer": (frozenset(), 0),
    "builtin": (frozenset(), 0), "command": (frozenset(), 0), "exec": (frozenset({"-a"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0), "ionice": (frozenset({"-c", "-n"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "xargs": (frozenset({"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a"}), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "flock": (frozenset({"-w", "-E", "--timeout"}), 1), "taskset": (frozenset(), 1),
    "coproc": (frozenset(), 0), "!": (frozenset(), 0), "busybox": (frozenset(), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u"}), 0), "watch": (frozenset({"-n"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-n", "-a", "-A"}), 0),
    "valgrind": (frozenset(), 0), "firejail": (frozenset(), 0), "chrt": (frozenset(), 1),
    "pkexec": (frozenset({"--user"}), 0), "fakeroot": (frozenset({"-l", "-s", "-i", "-b"}), 0),
    "unshare": (frozenset({"-S", "-G", "-R", "-w", "--setuid", "--setgid", "--root", "--wd"}), 0),
    "nsenter": (frozenset({"-t", "-S", "-G", "--target", "--setuid", "--setgid"}), 0),
    "setpriv": (frozenset({"--reuid", "--regid", "--groups", "--inh-caps", "--ambient-caps",
                           "--bounding-set", "--securebits"}), 0),
    "runuser": (frozenset({"-u", "-g", "-G", "--user", "--group", "--supp-group"}), 0),
    "systemd-run": (frozenset({"-p", "-E", "-u", "-M", "-H", "--property", "--setenv", "--unit",
                               "--machine", "--host", "--uid", "--gid", "--slice",
                               "--description", "--working-directory"}), 0),
    "parallel": (frozenset({"-j", "-S", "-a", "-d", "-E", "-I", "--jobs", "--sshlogin",
                            "--arg-file", "--colsep", "--delimiter", "--tmpdir", "--joblog",
                            "--results"}), 0),
}
#: Wrappers that add words from their input: ``xargs``, and ``parallel`` (``{}`` by default).
_FEEDERS = {"xargs": None, "parallel": "{}"}
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_SAFE_WORD_RE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_CRUDE_SPLIT_RE = re.compile(r"\|\||&&|\$\(|<\(|>\(|[;&|\n()`{}]")
#: In the crude reading: ``$`` before ``{`` or ``(``, and the place of a backtick or of
#: ``<(``/``>(`` (all split off next), and ``$`` then any text to the end of the word,
#: expand; a word that may glob is wholly uncertain.
_CRUDE_OPEN_RE = re.compile(r"\$(?=[{(])|(?=`|[<>]\()")
_CRUDE_WILD_RE = re.compile(r"\$\S+")
_CRUDE_GLOB_RE = re.compile(r"[*?]|\[.+\]")
#: A bash brace expansion (a list or a sequence, no blank inside): what it makes is not
#: read here, so the crude reading puts a wildcard in its place (innermost first).
_CRUDE_BRACE_RE = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
_TILDE_RE = re.compile(r"\A~[^/]*")
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_MAX_DEPTH = 4
#: Words of reading work per line (nested texts and every word sequence included).
_WORK_BUDGET = 400_000


@dataclass(frozen=True)
class ShellReading:
    """Everything the policy needs to know about one command line.

    ``commands``: each top-level simple command of the readings that parsed,
    rendered literally, for allow patterns (which use them only when
    ``certain``). ``reasons``: why a
    pattern may not allow the line (empty when ``certain``). ``candidates``:
    every reading a deny pattern is tried against, with :data:`WILD` and
    :data:`QUOTED_WILD` where a word is not certain. ``exhaustive`` is false
    when the broadest reading was too large to list; ``uncertain`` names each
    command whose deciding words are not literals. In both cases every deny
    and ask pattern must be taken to match.
    """

    commands: tuple[str, ...]
    certain: bool
    reasons: tuple[str, ...]
    candidates: tuple[str, ...]
    exhaustive: bool = True
    uncertain: tuple[str, ...] = ()


class _Collector:
    """Candidates of one line and its nested texts, within a work budget (in words)."""

    def __init__(self) -> None:
        self.candidates: dict[str, None] = {}
        self.exhaustive = True
        self.budget = _WORK_BUDGET
        self.nested: set[str] = set()
        self.segments: set[str] = set()
        self.uncertain: dict[str, None] = {}

    def spend(self, words: int) -> bool:
        """Charge ``words`` of work; false (and not exhaustive) once the budget is gone."""
        self.budget -= words
        if self.budget < 0:
            self.exhaustive = False
        return self.exhaustive

    def add(self, text: str) -> None:
        text = " ".join(text.split())
        if text:
            self.candidates.setdefault(text)

    def unsure(self, source: str) -> None:
        """``source`` runs something the parser cannot read with certainty."""
        shown = _one_line(source.replace(WILD, "$?").replace(QUOTED_WILD, "$?"))
        self.uncertain.setdefault(f"{shown!r}: what it runs is not a literal")


@lru_cache(maxsize=256)
def read_command_line(command: str) -> ShellReading:
    """Read ``command`` as bash and as sh; see the module doc for what follows."""
    return _read(command, depth=0)


def _read(command: str, *, depth: int, into: _Collector | None = None) -> ShellReading:
    collector = into or _Collector()
    collector.add(command)
    reasons: list[str] = []
    commands: dict[str, None] = {}
    failed = False
    for bash in (True, False):
        dialect = "bash" if bash else "sh"
        try:
            script = parse(command, bash=bash)
        except ShellSyntaxError as exc:
            reasons.append(f"{dialect} reading: {exc}")
            failed = True
            continue
        for rendered in _allow_walk(script, reasons, dialect):
            commands.setdefault(rendered)
        _deny_script(script, collector, depth, bash=bash)
    if failed:
        _crude(command, collector, depth)
    reasons.extend(collector.uncertain)
    return ShellReading(
        commands=tuple(commands),
        certain=not reasons,
        reasons=tuple(dict.fromkeys(reasons)),
        candidates=tuple(collector.candidates),
        exhaustive=collector.exhaustive,
        uncertain=tuple(collector.uncertain),
    )


def shell_segments(command: str) -> tuple[list[str], bool]:
    """The top-level simple commands of ``command`` rendered literally, and whether
    it is opaque: no pattern may allow it (see :class:`ShellReading`)."""
    reading = read_command_line(command)
    return list(reading.commands), not reading.certain


def deny_candidates(command: str) -> list[str]:
    """Every reading of ``command`` a deny pattern is tried against (see module doc)."""
    return list(read_command_line(command).candidates)


# --- allow: literal commands and what makes a line opaque ---------------------------------

def _allow_walk(script: Script, reasons: list[str], dialect: str) -> list[str]:
    out: list[str] = []
    for pipeline in script.pipelines:
        for command in pipeline.commands:
            if isinstance(command, FunctionDef):
                reasons.append(f"{dialect} reading: defines a function ({command.name!r})")
            elif isinstance(command, Compound):
                if command.kind == "for":
                    reasons.append(f"{dialect} reading: a 'for' loop assigns {command.name!r}")
                for word in command.words:
                    _word_reasons(word, reasons, dialect)
                _redirect_reasons(command.redirects, reasons, dialect)
                for body in command.bodies:
                    out.extend(_allow_walk(body, reasons, dialect))
            else:
                rendered = _allow_simple(command, reasons, dialect)
                if rendered is not None:
                    out.append(rendered)
    return out


def _allow_simple(command: SimpleCommand, reasons: list[str], dialect: str) -> str | None:
    where = f"{dialect} reading of {_one_line(command.raw)!r}"
    if command.assignments:
        reasons.append(f"{where}: assigns variables")
    for word in (*command.assignments, *command.words):
        _word_reasons(word, reasons, dialect)
    _redirect_reasons(command.redirects, reasons, dialect)
    if not command.words:
        return None  # only redirections: runs nothing
    name = command.words[0].literal
    if name is None:
        reasons.append(f"{where}: the command name expands")
        return None
    if name.rsplit("/", 1)[-1] in _HIDING:
        reasons.append(f"{where}: {name!r} runs text that is not on the line as a command")
    return " ".join(_render(word) for word in command.words)


def _word_reasons(word: Word, reasons: list[str], dialect: str) -> None:
    for part in word.parts:
        if isinstance(part, Expansion) and part.kind != "ansi":
            reasons.append(f"{dialect} reading: {part.kind} expansion {_one_line(part.raw)!r}")


def _redirect_reasons(redirects: tuple[Redirect, ...], reasons: list[str], dialect: str) -> None:
    for redirect in redirects:
        if redirect.target is not None and redirect.heredoc is None:
            _word_reasons(redirect.target, reasons, dialect)
        if redirect.heredoc is not None and not redirect.heredoc.quoted:
            for part in redirect.heredoc.parts:
                if isinstance(part, Expansion):
                    reasons.append(f"{dialect} reading: heredoc {part.kind} expansion "
                                   f"{_one_line(part.raw)!r}")
        target = redirect.target.literal if redirect.target is not None else None
        if redirect.op in _WRITES and target != "/dev/null":
            reasons.append(f"{dialect} reading: writes a file ({redirect.op} "
                           f"{_one_line(redirect.target.raw if redirect.target else '')})")
        elif redirect.op in (">&", "<&") and target != "/dev/null" and not (
                target is not None and (target.isdigit() or target == "-")):
            reasons.append(f"{dialect} reading: {redirect.op} to a file")


def _render(word: Word) -> str:
    literal = word.literal
    if literal is None:
        return word.raw.replace("\\\n", "")
    if _SAFE_WORD_RE.fullmatch(literal):
        return literal
    return "'" + literal.replace("'", "'\\''") + "'"


def _one_line(text: str) -> str:
    text = " ".join(text.replace("\\\n", "").split())
    return text if len(text) <= 60 else text[:57] + "..."


# --- deny: every reading ------------------------------------------------------------------

def _deny_script(script: Script, out: _Collector, depth: int, *, bash: bool) -> None:
    for pipeline in script.pipelines:
        _deny_pipeline(pipeline, out, depth, bash=bash)


def _deny_pipeline(pipeline: Pipeline, out: _Collector, depth: int, *, bash: bool) -> None:
    piped: list[str] = []  # what earlier commands of the pipeline might write to a shell
    for command in pipeline.commands:
        if isinstance(command, FunctionDef):
            _deny_compound(command.body, out, depth, bash=bash)
            piped.append(WILD)
            continue
        if isinstance(command, Compound):
            _deny_compound(command, out, depth, bash=bash)
            piped.append(WILD)  # what `{ echo rm x; } | sh` writes is not read here
            continue
        for word in (*command.assignments, *command.words):
            _deny_word(word, out, depth, bash=bash)
        texts = [_deny_text(word, bash=bash) for word in command.words]
        stdin: list[str] = list(piped)
        for redirect in command.redirects:
            _deny_redirect(redirect, out, depth, bash=bash)
            stdin.extend(_stdin_texts(redirect, bash=bash))
        source = command.raw.replace("\\\n", "")
        out.add(source)
        out.add(" ".join(_render(word) for word in command.words))
        assignments = [_deny_text(word, bash=bash) for word in command.assignments]
        _deny_words(assignments + texts, out, depth, stdin=stdin, source=source)
        # What a command writes into the pipe is not read here (`echo rm x | sh`, a function,
        # `cat f`): a shell reading the pipe may run anything.
        piped.append(WILD)


def _deny_compound(command: Compound, out: _Collector, depth: int, *, bash: bool) -> None:
    for word in command.words:
        _deny_word(word, out, depth, bash=bash)
    for redirect in command.redirects:
        _deny_redirect(redirect, out, depth, bash=bash)
    for body in command.bodies:
        _deny_script(body, out, depth, bash=bash)


def _deny_word(word: Word, out: _Collector, depth: int, *, bash: bool) -> None:
    for part in word.parts:
        if isinstance(part, Expansion) and part.script is not None:
            _deny_script(part.script, out, depth, bash=bash)


def _deny_redirect(redirect: Redirect, out: _Collector, depth: int, *, bash: bool) -> None:
    if redirect.target is not None:
        _deny_word(redirect.target, out, depth, bash=bash)
    if redirect.heredoc is not None:
        for part in redirect.heredoc.parts:
            if isinstance(part, Expansion) and part.script is not None:
                _deny_script(part.script, out, depth, bash=bash)


def _stdin_texts(redirect: Redirect, *, bash: bool) -> list[str]:
    """What ``redirect`` gives a command to read, as text (a shell runs it)."""
    if redirect.heredoc is not None:
        return [_heredoc_text(redirect.heredoc)]
    if redirect.target is None:
        return []
    target = _deny_text(redirect.target, bash=bash)
    if redirect.op == "<<<":
        return [target]
    if redirect.fd in (None, "0") and (
            (redirect.op in ("<", "<>") and _is_wild(target))
            or (redirect.op == "<&" and target not in ("0", "-"))):
        return [WILD]  # a file or descriptor the line does not name
    return []


def _heredoc_text(doc: Heredoc) -> str:
    """A heredoc's body as the command reads it: an expansion in it is not certain."""
    if doc.quoted:
        return doc.body
    return "".join(part.text if isinstance(part, Literal) else WILD for part in doc.parts)


def _deny_text(word: Word, *, bash: bool) -> str:
    """``word`` as deny candidates read it: quotes removed, and a wildcard wherever its
    value is not certain (see the module doc)."""
    if _globs(word) or (bash and _braces(word)):
        return WILD
    out: list[str] = []
    for index, part in enumerate(word.parts):
        if not isinstance(part, Literal):
            out.append(QUOTED_WILD if part.quoted else WILD)
        elif index == 0 and not part.quoted and part.text.startswith("~"):
            slash = part.text.find("/")  # ~user/dir: only the directory is uncertain
            out.append(QUOTED_WILD + ("" if slash < 0 else part.text[slash:]))
        else:
            out.append(part.text)
    return "".join(out)


def _syntax_chars(word: Word) -> str:
    """``word`` with every character that cannot be glob or brace syntax (quoted, or
    inside an expansion) replaced by a space."""
    return "".join(part.text if isinstance(part, Literal) and not part.quoted
                   else " " * len(part.text if isinstance(part, Literal) else part.raw)
                   for part in word.parts)


def _globs(word: Word) -> bool:
    """Whether ``word`` may match file names: an unquoted ``*``, ``?`` or ``[..]``."""
    chars = _syntax_chars(word)
    if "*" in chars or "?" in chars:
        return True
    opened = chars.find("[")
    return opened >= 0 and chars.rfind("]") > opened + 1


def _braces(word: Word) -> bool:
    """Whether bash may brace-expand ``word``: an unquoted ``{`` then ``,`` or ``..`` and
    ``}`` (broadly: nesting and order inside are not checked)."""
    chars = _syntax_chars(word)
    opened = chars.find("{")
    if opened < 0 or chars.rfind("}") < opened:
        return False
    inside = chars[opened:]
    return "," in inside or ".." in inside


def _is_wild(text: str) -> bool:
    return not _WILDS.isdisjoint(text)


def _uncertain_name(head: str) -> bool:
    """Whether a command word names no certain command: ``"$d"/rm`` is ``rm``, but an
    unquoted ``$d/rm`` may split into other words, and ``r$x`` may be any name."""
    return WILD in head or _is_wild(head.rsplit("/", 1)[-1])


def _deny_words(words: list[str], out: _Collector, depth: int, *,
                stdin: list[str] | None = None, source: str) -> None:
    """Candidates of one command given as words: unwrapped, basenamed, nested.

    A command whose name is not certain is not a candidate: it is ``unsure``
    (every deny and ask pattern matches it). ``source`` is the text it came from.
    """
    if words and not _is_wild(words[0]):  # "$d"/rm: only "rm" says what runs
        out.add(" ".join(words))
    if _sets_runner(words):
        out.unsure(source)
    while words and _ASSIGNMENT_RE.match(words[0]):
        words = words[1:]
    for unwrapped in _unwrappings(words):
        if not unwrapped:
            continue
        if _uncertain_name(unwrapped[0]):
            out.unsure(source)
            continue
        head = unwrapped[0]
        base = head.rsplit("/", 1)[-1].lstrip("\\") or head
        rest = " ".join(unwrapped[1:])
        if not _is_wild(head):
            out.add(" ".join(unwrapped))
        out.add(f"{base} {rest}")
        if _runs_text(base, unwrapped[1:]):
            out.unsure(source)
        if base == "git":
            out.add(" ".join(["git", *_git_command(unwrapped[1:])]))
        for text in _nested_texts(base, unwrapped[1:], stdin or []):
            _nested(text, out, depth, source=source)
        for inner in _exec_operands(base, unwrapped[1:]):
            _deny_words(inner, out, depth, source=source)


#: Variables that make a program run text they hold, or load code: a shell's functions
#: (``BASH_FUNC_f%%``), prompts and start-up files, the dynamic loader's, git's and a pager's.
_RUNNER_VAR_RE = re.compile(
    r"(?:BASH_FUNC_[^=]*|PS[0-4]|ENV|BASH_ENV|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|"
    r"LD_[A-Z_]+|GCONV_PATH|GIT_[A-Z0-9_]+|PAGER|MANPAGER|EDITOR|VISUAL|PERL5OPT|"
    r"PYTHONSTARTUP|NODE_OPTIONS)=")
#: Programs that run text given to them (a string, their input, a terminal): whatever
#: their words say, what they run is not read here.
_TEXT_RUNNERS = frozenset({"script", "sg", "expect", "at", "batch", "tmux", "screen",
                           "parallel", "setarch", "linux32", "linux64", "uname26", "i386",
                           "x86_64", "prlimit"})
#: A file name that is a standard-input route: a shell given it as its script reads a pipe.
_STDIN_PATH_RE = re.compile(r"/dev/(?:stdin|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")
#: git's options before its command (``git -C d push`` runs ``git push``): those taking a
#: value as the next word.
_GIT_VALUED = frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                         "--list-cmds", "--attr-source"})


def _sets_runner(words: list[str]) -> bool:
    """Whether the command's assignments, or its wrappers' (``env 'BASH_FUNC_f%%=..'``,
    ``sudo PS4=..``), set a variable that runs text (:data:`_RUNNER_VAR_RE`)."""
    for word in words:
        if _RUNNER_VAR_RE.match(word):
            return True
        if _ASSIGNMENT_RE.match(word) or word.startswith("-") or "=" in word \
                or word.rsplit("/", 1)[-1] in _WRAPPERS:
            continue
        return False
    return False


def _runs_text(base: str, args: list[str]) -> bool:
    """Whether ``base args`` runs text this reader does not see: :data:`_TEXT_RUNNERS`,
    ``hash -p`` (a name for any file), ``enable -f`` (a builtin loaded from a file), and
    ``git`` told to run a program by ``-c``/``--config-env`` (an alias, a pager) or
    ``--exec-path``."""
    if base in _TEXT_RUNNERS or (base == "env" and _split_strings(args)):
        return True
    options = [arg for arg in args if arg.startswith("-") and not arg.startswith("--")]
    if base == "hash" and any("p" in arg for arg in options):
        return True
    if base == "enable" and any("f" in arg for arg in options):
        return True
    if base in ("make", "gmake") and any(
            arg.startswith(("--eval", "-E")) or (prev in ("-f", "--file", "--makefile") and (
                arg == "-" or _STDIN_PATH_RE.fullmatch(arg)))
            for prev, arg in zip(["", *args], args, strict=False)):
        return True  # recipes from a pipe or from the line: not read here
    if base == "git":
        for arg in args:
            if arg in ("-c", "--config-env") or arg.startswith(("-c", "--config-env",
                                                                   "--exec-path")):
                return True
            if not arg.startswith("-"):
                break
    return False


def _git_command(args: list[str]) -> list[str]:
    """git's command and its words, past git's own options."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _GIT_VALUED else 1
    return args[index:]


def _unwrappings(words: list[str]) -> list[list[str]]:
    """``words``, then each command a wrapper in front of it would run (``[WILD]`` when
    a word that decides it is not certain; ``xargs`` adds its input, :data:`WILD`)."""
    out = [words]
    for _ in range(16):
        if not words:
            break
        base = words[0].rsplit("/", 1)[-1]
        if base not in _WRAPPERS:
            break
        unwrapped = _unwrap(base, words[1:])
        if unwrapped is None:
            out.append([WILD])
            break
        words, replace = unwrapped
        if base in _FEEDERS and words:
            replace = replace or _FEEDERS[base]
            words = [w.replace(replace, WILD) for w in words] if replace else [*words, WILD]
            if base == "parallel":
                words.append(WILD)  # without {} it appends; ::: lists are input too
        out.append(words)
    return out


def _unwrap(base: str, words: list[str]) -> tuple[list[str], str | None] | None:
    """The command wrapper ``base`` runs from its arguments ``words``, with ``xargs``'s
    replace string; ``None`` when a word that decides it is not certain: any unquoted
    expansion, or a quoted one where an option or the command is read (a quoted
    assignment value or option value is data)."""
    valued, operands = _WRAPPERS[base]
    replace: str | None = None
    while words:
        word = words[0]
        if word == "--":
            words = words[1:]
            break
        if WILD in word or (QUOTED_WILD in word and not _ASSIGNMENT_RE.match(word)):
            return None
        if word in valued:
            if len(words) > 1 and WILD in words[1]:
                return None
            replace = words[1] if word == "-I" and len(words) > 1 else replace
            words = words[2:]
        elif word.startswith("-") or _ASSIGNMENT_RE.match(word):
            replace = (_xargs_replace(word) if base in _FEEDERS else None) or replace
            words = words[1:]
        else:
            break  # the first operand or the command: checked above
    return words[operands:], replace


def _xargs_replace(option: str) -> str | None:
    """The replace string an ``xargs`` option sets (``-I{}``, ``-i``, ``--replace=R``)."""
    if option.startswith("-I") and len(option) > 2:
        return option[2:]
    if option in ("-i", "--replace"):
        return "{}"
    if option.startswith("--replace="):
        return option.split("=", 1)[1]
    if option.startswith("-i") and not option.startswith("--"):
        return option[2:]
    return None


def _nested_texts(base: str, args: list[str], stdin: list[str]) -> list[str]:
    """Text that ``base args`` would run as shell commands (:data:`WILD` when a word
    that decides it is not certain)."""
    if base == "eval":
        return [" ".join(args)]
    if base == "trap" and args:
        return [args[0]]
    if base == "alias":
        return [arg.split("=", 1)[1] for arg in args if "=" in arg]
    if base in (".", "source"):
        if args and (_is_wild(args[0]) or _STDIN_PATH_RE.fullmatch(args[0])):
            return [WILD]
        return []  # a file named literally: not read
    if base == "env":
        return _split_strings(args)
    if base in ("su", "runuser", "flock"):
        return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("-c", "--command")]
    if base == "watch":
        return [" ".join(arg for arg in args if not arg.startswith("-"))]
    if base not in _SHELLS:
        return []
    for arg in args:
        if _is_wild(arg):
            return [WILD]  # an option, the script or the text expands
        if not arg.startswith(("-", "+")):
            break
    operands = [arg for arg in args if not arg.startswith(("-", "+"))]
    if any(arg.startswith("-") and not arg.startswith("--") and "c" in arg for arg in args):
        return operands  # sh -c TEXT (and, broadly, every operand after it)
    if operands and _STDIN_PATH_RE.fullmatch(operands[0]):
        return [*stdin, WILD]  # `sh /dev/fd/0 <<E`: its script is a pipe or a descriptor
    if not operands or any(arg.startswith("-") and "s" in arg.lstrip("-") for arg in args):
        return stdin  # a shell reading its standard input
    return []


def _split_strings(args: list[str]) -> list[str]:
    """The texts ``env -S`` splits and runs, in every spelling (``-S T``, ``-ST``,
    ``-iS T``, ``--split-string=T``, an abbreviation such as ``--sp T``); :data:`WILD` for
    one with an escape or a variable, which env itself expands."""
    texts: list[str] = []
    for index, arg in enumerate(args):
        text: str | None = None
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if len(name) > 2 and "--split-string".startswith(name):
                text = value if equals else (args[index + 1] if index + 1 < len(args) else "")
        elif arg.startswith("-") and "S" in arg:
            value = arg[arg.index("S") + 1:]
            text = value or (args[index + 1] if index + 1 < len(args) else "")
        elif not arg.startswith("-") and "=" not in arg:
            break  # the command: its own options are not env's
        if text is not None:
            texts.append(WILD if "\\" in text or "$" in text else text)
    return texts


def _exec_operands(base: str, args: list[str]) -> list[list[str]]:
    """The commands ``find -exec``/``-execdir``/``-ok`` would run."""
    if base != "find":
        return []
    out: list[list[str]] = []
    current: list[str] | None = None
    for arg in args:
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            current = []
        elif current is not None and arg in (";", "+"):
            out.append(current)
            current = None
        elif current is not None:
            current.append(arg)
    if current:
        out.append(current)
    return out


def _nested(text: str, out: _Collector, depth: int, *, source: str) -> None:
    if _is_wild(text):
        out.unsure(source)
        return
    if text in out.nested or not out.spend(len(text.split())):
        return
    out.nested.add(text)
    if depth >= _MAX_DEPTH:
        _crude(text, out, depth)
        return
    _read(text, depth=depth + 1, into=out)


def _crude(text: str, out: _Collector, depth: int) -> None:
    """The broadest reading: every operator character splits, quotes or not, and
    every word of a segment may start a command.

    Four variants: quotes and backslashes removed, replaced by spaces, removed with
    commas read as spaces (bash brace expansion, ``{rm,x}``), and removed with every
    brace expansion (``{r..r}m``, ``r{m,}``, nested ones) not certain. A ``$`` and
    what follows it, a ``~name`` prefix and a word that may glob are not certain.
    """
    unquoted = re.sub(r"\\\n", "", text)
    bare = re.sub(r"[\\'\"]", "", unquoted)
    braced = bare
    while (expanded := _CRUDE_BRACE_RE.sub(WILD, braced)) != braced:
        braced = expanded
    for variant in (bare, re.sub(r"[\\'\"]", " ", unquoted), bare.replace(",", " "), braced):
        for segment in _CRUDE_SPLIT_RE.split(_CRUDE_OPEN_RE.sub(WILD, variant)):
            words = [WILD if _CRUDE_GLOB_RE.search(word)
                     else _TILDE_RE.sub(QUOTED_WILD, _CRUDE_WILD_RE.sub(WILD, word))
                     for word in segment.split()]
            if words and " ".join(words) not in out.segments:
                out.segments.add(" ".join(words))
                _deny_words_crude(words, out, depth, source=segment)


def _deny_words_crude(words: list[str], out: _Collector, depth: int, *, source: str) -> None:
    """Every word sequence of a segment: any word may start a command in some reading."""
    for start in range(len(words)):
        if not out.spend(len(words) - start):
            return
        if depth >= _MAX_DEPTH:
            out.add(" ".join(words[start:]))
            if _uncertain_name(words[start]):
                out.unsure(source)
        else:
            _deny_words(words[start:], out, depth + 1, source=source)

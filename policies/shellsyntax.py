"""A strict reader of shell command lines: the structure ``sh -c`` would run.

This is not a shell: it expands nothing and runs nothing. It reads a command
line into simple commands (words, assignments, redirections, heredocs) and
the compound commands around them, the way bash and POSIX sh (dash, the
``/bin/sh`` every sandbox backend runs commands with) both read it, and it
**refuses** what it cannot read with certainty: anything outside the subset
below raises :class:`ShellSyntaxError`, so callers fail closed.

Read here: comments (``#`` at the start of a word, to the end of the line),
quoting (``'..'``, ``".."``, ``\\``), backslash-newline continuations,
operators (``; & && || | ( )`` and newlines), reserved words only in command
position (``{ } ! if then elif else fi while until do done for in case
esac``), redirections (``< > >> >| <> <& >&``, ``<<``, ``<<-`` with quoted or
unquoted delimiters, an IO number in front), expansions as opaque parts
(``$name``, ``${..}`` without quotes inside, ``$(..)`` and backticks parsed
recursively, ``$((..))`` arithmetic), function definitions ``f() {..}``.

Dialect: ``bash=True`` reads bash's extensions (``$'..'``, ``$".."``, ``&>``,
``&>>``, ``<<<``, ``<(..)``, ``>(..)``); ``bash=False`` reads them as POSIX
sh does (``$`` then a quoted string; ``&`` then ``>``; ``<<<`` and ``<(``
are errors). Constructs whose reading differs between the two and that this
reader does not model (``[[``, ``((``, ``function``, ``select``, ``coproc``,
``|&``, ``;&``, ``$[..]``, arrays, ``{fd}>``, reserved words after a
redirection or an assignment, a heredoc ended by the end of the text) are
errors in both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "Command",
    "Compound",
    "Expansion",
    "FunctionDef",
    "Heredoc",
    "Literal",
    "Param",
    "Part",
    "Pipeline",
    "Redirect",
    "Script",
    "ShellSyntaxError",
    "SimpleCommand",
    "Word",
    "parse",
]

_BLANK = " \t"
_META = " \t\n;&|()<>"
_RESERVED = frozenset({"{", "}", "!", "if", "then", "elif", "else", "fi", "while", "until", "do",
                       "done", "for", "in", "case", "esac"})
#: Words bash reads as keywords and POSIX sh as commands: refused in command position.
_AMBIGUOUS = frozenset({"[[", "function", "select", "coproc"})
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = frozenset("@*#?-$!0123456789")
_ARITH_OK = re.compile(r"[A-Za-z0-9_ \t\n+\-*/%<>=!&|^~?:,()$]*")
_PARAM_OK = re.compile(r"[A-Za-z0-9_@*#?\-$!:%/=+^,.~ ]*")
_MAX_DEPTH = 32
#: Runs of characters that are plain inside a word / inside double quotes (fast path).
_PLAIN_RE = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_PLAIN_DQ_RE = re.compile(r"[^\"\\$`]+")


class ShellSyntaxError(ValueError):
    """The text is not something this reader reads with certainty."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} (at offset {position})")
        self.reason = reason
        self.position = position


@dataclass(frozen=True)
class Literal:
    """Literal text; ``quoted`` when it came from quotes or a backslash."""

    text: str
    quoted: bool


@dataclass(frozen=True)
class Param:
    """``$name``, ``${name}`` or a special parameter: expands, runs nothing.

    ``quoted`` when it stands inside double quotes (or a heredoc body): its value
    stays inside one word instead of being split into several."""

    name: str
    raw: str
    quoted: bool = False


@dataclass(frozen=True)
class Expansion:
    """Text whose value is computed: ``command`` (``$(..)``, backticks),
    ``process`` (``<(..)``), ``arith`` (``$((..))``), ``param`` (``${x..}``
    with an operator), ``ansi`` (bash ``$'..'`` and ``$".."``). ``script`` is
    what a command or process substitution runs. ``quoted`` when its value
    stays inside one word (double quotes, a heredoc body, ``$'..'``, a process
    substitution's file name) instead of being split into several."""

    kind: str
    raw: str
    script: Script | None = None
    quoted: bool = False


Part = Literal | Param | Expansion


@dataclass(frozen=True)
class Word:
    """One shell word: its source text and its parts."""

    raw: str
    parts: tuple[Part, ...]

    @property
    def literal(self) -> str | None:
        """The word's value when it expands to exactly itself, else ``None``.

        ``None`` when any part expands or an unquoted character globs (``*?[``),
        brace-expands in bash (``{``, ``}``) or tilde-expands (a leading ``~``).
        """
        out: list[str] = []
        for index, part in enumerate(self.parts):
            if not isinstance(part, Literal):
                return None
            if not part.quoted and (set(part.text) & set("*?[]{}")
                                    or (index == 0 and part.text.startswith("~"))):
                return None
            out.append(part.text)
        return "".join(out)

    @property
    def text(self) -> str:
        """The word with quotes removed and every expansion kept as its source."""
        return "".join(p.text if isinstance(p, Literal) else p.raw for p in self.parts)

    def unquoted_reserved(self) -> str | None:
        """The word when it is one unquoted literal (how reserved words are spelled)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Literal) and not self.parts[0].quoted:
            return self.parts[0].text
        return None


@dataclass
class Heredoc:
    """A here-document: its delimiter, whether it was quoted, and its body.

    The body is read after the end of the line that names it, so the parser
    fills ``body`` and ``parts`` (the expansions of an unquoted body) then.
    """

    delimiter: str
    quoted: bool
    strip_tabs: bool
    body: str = ""
    parts: tuple[Part, ...] = ()


@dataclass(frozen=True)
class Redirect:
    """One redirection: ``fd`` (``None`` for the operator's default), operator, target."""

    fd: str | None
    op: str
    target: Word | None = None
    heredoc: Heredoc | None = None


@dataclass(frozen=True)
class SimpleCommand:
    """Assignments, words and redirections, with its source text."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    raw: str


@dataclass(frozen=True)
class Compound:
    """``subshell``, ``group``, ``if``, ``while``, ``until``, ``for`` or ``case``.

    ``words`` are what the compound expands itself (a ``for`` list, the
    ``case`` subject and patterns); ``name`` is a ``for`` variable.
    """

    kind: str
    bodies: tuple[Script, ...]
    words: tuple[Word, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    name: str | None = None


@dataclass(frozen=True)
class FunctionDef:
    """``name() compound``: defines a function, runs nothing yet."""

    name: str
    body: Compound


Command = SimpleCommand | Compound | FunctionDef


@dataclass(frozen=True)
class Pipeline:
    """Commands joined by ``|`` (``negated`` with a leading ``!``)."""

    commands: tuple[Command, ...]
    negated: bool = False


@dataclass(frozen=True)
class Script:
    """A list of pipelines (the separators do not change what runs)."""

    pipelines: tuple[Pipeline, ...] = field(default_factory=tuple)


# --- tokens -------------------------------------------------------------------------------

@dataclass
class _Tok:
    kind: str  # word, op, redir, newline, eof
    value: str = ""
    word: Word | None = None
    fd: str | None = None
    start: int = 0
    adjacent_paren: bool = False  # an op "(" directly followed by "("
    end: int = 0


class _Parser:
    def __init__(self, text: str, *, bash: bool, depth: int) -> None:
        self.s = text
        self.i = 0
        self.bash = bash
        self.depth = depth
        self.pending: list[Heredoc] = []
        self.peeked: _Tok | None = None
        self.last_end = 0

    # -- characters ------------------------------------------------------------------------

    def error(self, reason: str, at: int | None = None) -> ShellSyntaxError:
        return ShellSyntaxError(reason, self.i if at is None else at)

    def _bnl(self) -> None:
        while self.s.startswith("\\\n", self.i):
            self.i += 2

    def ch(self, ahead: int = 0) -> str:
        """The character ``ahead`` places on, after backslash-newline removal."""
        self._bnl()
        j = self.i
        for _ in range(ahead):
            j += 1
            while self.s.startswith("\\\n", j):
                j += 2
        return self.s[j] if j < len(self.s) else ""

    def take(self) -> str:
        self._bnl()
        if self.i >= len(self.s):
            raise self.error("unexpected end of text")
        char = self.s[self.i]
        self.i += 1
        return char

    # -- tokens ----------------------------------------------------------------------------

    def peek(self) -> _Tok:
        if self.peeked is None:
            self.peeked = self._lex()
        return self.peeked

    def next(self) -> _Tok:
        tok = self.peek()
        self.peeked = None
        self.last_end = tok.end
        return tok

    def _lex(self) -> _Tok:
        tok = self._lex_one()
        tok.end = self.i
        return tok

    def _lex_one(self) -> _Tok:
        while True:
            char = self.ch()
            if char and char in _BLANK:
                self.take()
                continue
            if char == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
                continue
            break
        start = self.i
        if char == "":
            return _Tok("eof", start=start)
        if char == "\n":
            self.take()
            self._read_heredocs()
            return _Tok("newline", "\n", start=start)
        two, three = char + self.ch(1), char + self.ch(1) + self.ch(2)
        if self.bash and three == "&>>":
            self._skip(3)
            return _Tok("redir", "&>>", start=start)
        if self.bash and two == "&>":
            self._skip(2)
            return _Tok("redir", "&>", start=start)
        if two in {"&&", "||"}:
            self._skip(2)
            return _Tok("op", two, start=start)
        if two == "|&":
            raise self.error("'|&' is bash-only and read differently by sh")
        if two == ";;":
            self._skip(2)
            if self.ch() == "&":
                raise self.error("';;&' is bash-only")
            return _Tok("op", ";;", start=start)
        if two == ";&":
            raise self.error("';&' is bash-only")
        if char in ";&|":
            self.take()
            return _Tok("op", char, start=start)
        if char == "(":
            self.take()
            return _Tok("op", "(", start=start, adjacent_paren=self.ch() == "(")
        if char == ")":
            self.take()
            return _Tok("op", ")", start=start)
        if char in "<>":
            if self.ch(1) == "(":
                if not self.bash:
                    raise self.error("process substitution is bash-only")
                return self._word_tok(start)
            return self._redir_tok(None, start)
        return self._word_tok(start)

    def _skip(self, count: int) -> None:
        for _ in range(count):
            self.take()

    def _redir_tok(self, fd: str | None, start: int) -> _Tok:
        char = self.take()
        nxt = self.ch()
        if char == "<":
            if nxt == "<":
                self.take()
                if self.ch() == "<":
                    if not self.bash:
                        raise self.error("'<<<' is bash-only")
                    self.take()
                    return _Tok("redir", "<<<", fd=fd, start=start)
                if self.ch() == "-":
                    self.take()
                    return _Tok("redir", "<<-", fd=fd, start=start)
                return _Tok("redir", "<<", fd=fd, start=start)
            if nxt in "&>":
                self.take()
                return _Tok("redir", "<" + nxt, fd=fd, start=start)
            return _Tok("redir", "<", fd=fd, start=start)
        if nxt in ">|&":
            self.take()
            return _Tok("redir", ">" + nxt, fd=fd, start=start)
        return _Tok("redir", ">", fd=fd, start=start)

    def _word_tok(self, start: int) -> _Tok:
        word = self.read_word()
        # An IO number: bash reads any digits, dash one ("10>f" is the word 10 then ">f").
        if word.raw.isdigit() and (self.bash or len(word.raw) == 1) and self.ch() in ("<", ">"):
            if self.ch(1) == "(":
                raise self.error("a number before a process substitution")
            return self._redir_tok(word.raw, start)
        if (self.ch() in ("<", ">") and re.fullmatch(r"\{[A-Za-z_][A-Za-z0-9_]*\}", word.raw)):
            raise self.error("'{name}>' redirections are bash-only")
        return _Tok("word", word.raw, word=word, start=start)

    # -- words -----------------------------------------------------------------------------

    def read_word(self) -> Word:
        start = self.i
        parts: list[Part] = []
        while True:
            char = self.ch()
            if char == "" or char in _META:
                if char in "<>" and char and self.ch(1) == "(" and not parts:
                    parts.append(self._process_subst())
                    continue
                break
            if char == "'":
                self.take()
                parts.append(Literal(self._until_quote(), True))
            elif char == '"':
                self.take()
                parts.extend(self._double_quoted())
            elif char == "\\":
                self.take()
                if self.i >= len(self.s):
                    raise self.error("a backslash at the end of the text")
                parts.append(Literal(self.take(), True))
            elif char == "$" and self.bash and self.ch(1) == '"':
                # bash $"..": a double-quoted string it may translate; its expansions run.
                self._skip(2)
                parts.append(Expansion("ansi", '$"', quoted=True))
                parts.extend(self._double_quoted())
            elif char == "$":
                parts.append(self._dollar(in_quotes=False))
            elif char == "`":
                parts.append(self._backtick(in_quotes=False))
            else:
                plain = _PLAIN_RE.match(self.s, self.i)
                if plain is None:  # pragma: no cover - ch() returned a plain character
                    raise self.error(f"unexpected {char!r}")
                self.i = plain.end()
                parts.append(Literal(plain.group(), False))
        if not parts:
            raise self.error(f"unexpected {self.ch()!r}")
        return Word(self.s[start:self.i], tuple(_merge(parts)))

    def _until_quote(self) -> str:
        end = self.s.find("'", self.i)
        if end < 0:
            raise self.error("an unterminated single quote", self.i - 1)
        text = self.s[self.i:end]
        self.i = end + 1
        return text

    def _double_quoted(self, *, heredoc: bool = False) -> list[Part]:
        parts: list[Part] = []
        opened = self.i - 1
        while True:
            char = self.ch()
            if char == "":
                if heredoc:
                    return parts
                raise self.error("an unterminated double quote", opened)
            if char == '"' and not heredoc:
                self.take()
                return parts
            if char == "\\":
                self.take()
                nxt = self.ch()
                if nxt in ("$", "`", "\\") or (nxt == '"' and not heredoc):
                    parts.append(Literal(self.take(), True))
                else:
                    parts.append(Literal("\\", True))
            elif char == "$":
                parts.append(self._dollar(in_quotes=True))
            elif char == "`":
                parts.append(self._backtick(in_quotes=not heredoc))
            else:
                plain = _PLAIN_DQ_RE.match(self.s, self.i)
                if plain is None:  # pragma: no cover - ch() returned a plain character
                    raise self.error(f"unexpected {char!r}")
                self.i = plain.end()
                parts.append(Literal(plain.group(), True))

    def _dollar(self, *, in_quotes: bool) -> Part:
        start = self.i
        self.take()
        nxt = self.ch()
        if nxt == "(":
            if self.ch(1) == "(":
                return self._arith(start, in_quotes=in_quotes)
            self.take()
            script = self._nested_until_paren()
            return Expansion("command", self.s[start:self.i], script, in_quotes)
        if nxt == "{":
            return self._braced_param(start, in_quotes=in_quotes)
        if nxt == "[":
            raise self.error("'$[..]' arithmetic is bash-only")
        if nxt == "'" and not in_quotes:
            if not self.bash:
                return Literal("$", False)
            self.take()
            self._ansi_c()
            return Expansion("ansi", self.s[start:self.i], quoted=True)
        if nxt == '"' and not in_quotes:  # sh: a plain "$" (bash's $".." is read by read_word)
            return Literal("$", False)
        if nxt and nxt in _SPECIAL:
            self.take()
            return Param(nxt, self.s[start:self.i], in_quotes)
        if nxt and (nxt.isascii() and (nxt.isalpha() or nxt == "_")):
            name = [self.take()]
            while (char := self.ch()) and char.isascii() and (char.isalnum() or char == "_"):
                name.append(self.take())
            return Param("".join(name), self.s[start:self.i], in_quotes)
        return Literal("$", in_quotes)

    def _ansi_c(self) -> None:
        while True:
            if self.i >= len(self.s):
                raise self.error("an unterminated $'..' string")
            char = self.s[self.i]
            self.i += 1
            if char == "\\":
                if self.i >= len(self.s):
                    raise self.error("an unterminated $'..' string")
                self.i += 1
            elif char == "'":
                return

    def _braced_param(self, start: int, *, in_quotes: bool) -> Part:
        self.take()  # "{"
        end = self.s.find("}", self.i)
        if end < 0:
            raise self.error("an unterminated '${'")
        body = self.s[self.i:end]
        if not _PARAM_OK.fullmatch(body) or "\\\n" in body:
            raise self.error("a '${..}' expansion with quotes, substitutions or nesting")
        self.i = end + 1
        raw = self.s[start:self.i]
        if _NAME_RE.fullmatch(body) or (len(body) == 1 and body in _SPECIAL):
            return Param(body, raw, in_quotes)
        if not body:
            raise self.error("an empty '${}'")
        return Expansion("param", raw, quoted=in_quotes)

    def _arith(self, start: int, *, in_quotes: bool) -> Part:
        self._skip(2)  # "(("
        depth = 2
        begin = self.i
        while depth:
            if self.i >= len(self.s):
                raise self.error("an unterminated '$(('")
            char = self.s[self.i]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            self.i += 1
        body = self.s[begin:self.i - 2]
        if self.s[self.i - 2] != ")" or not _ARITH_OK.fullmatch(body) or "$(" in body:
            raise self.error("a '$((..))' that is not plain arithmetic")
        return Expansion("arith", self.s[start:self.i], quoted=in_quotes)

    def _nested_until_paren(self) -> Script:
        if self.depth >= _MAX_DEPTH:
            raise self.error("nested too deeply")
        inner = _Parser(self.s, bash=self.bash, depth=self.depth + 1)
        inner.i = self.i
        script = inner.script(stop_ops=(")",), stop_words=())
        tok = inner.next()
        if tok.kind != "op" or tok.value != ")":
            raise self.error("an unterminated substitution", tok.start)
        if inner.pending:
            raise self.error("a heredoc that outlives its substitution", tok.start)
        if self.pending and "\n" in self.s[self.i:inner.i]:
            raise self.error("a substitution spanning lines before a pending heredoc body")
        self.i = inner.i
        return script

    def _process_subst(self) -> Part:
        start = self.i
        kind = self.take()
        self.take()  # "("
        script = self._nested_until_paren()
        return Expansion("process", kind + self.s[start + 1:self.i], script, quoted=True)

    def _backtick(self, *, in_quotes: bool) -> Part:
        start = self.i
        self.take()
        inner: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise self.error("an unterminated backtick")
            char = self.s[self.i]
            self.i += 1
            if char == "`":
                break
            if char == "\\" and self.i < len(self.s):
                nxt = self.s[self.i]
                if nxt == '"' and in_quotes:
                    raise self.error('\\" inside backticks inside double quotes')
                if nxt in "$`\\":
                    inner.append(nxt)
                    self.i += 1
                    continue
                if nxt == "\n":
                    self.i += 1
                    continue
            inner.append(char)
        if self.depth >= _MAX_DEPTH:
            raise self.error("nested too deeply")
        if self.pending and "\n" in self.s[start:self.i]:
            raise self.error("backticks spanning lines before a pending heredoc body", start)
        sub = _Parser("".join(inner), bash=self.bash, depth=self.depth + 1)
        try:
            script = sub.script(stop_ops=(), stop_words=())
            if sub.next().kind != "eof" or sub.pending:
                raise sub.error("trailing text")
        except ShellSyntaxError as exc:
            raise self.error(f"inside backticks: {exc.reason}", start) from exc
        return Expansion("command", self.s[start:self.i], script, in_quotes)

    # -- heredocs --------------------------------------------------------------------------

    def _read_heredocs(self) -> None:
        pending, self.pending = self.pending, []
        for doc in pending:
            lines: list[str] = []
            body_start = self.i
            while True:
                if self.i >= len(self.s):
                    raise self.error(f"heredoc {doc.delimiter!r} ended by the end of the text")
                end = self.s.find("\n", self.i)
                line_end = len(self.s) if end < 0 else end
                line = self.s[self.i:line_end]
                self.i = line_end + (end >= 0)
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check == doc.delimiter:
                    break
                if not doc.quoted and line.endswith("\\"):
                    raise self.error("a line continuation inside an unquoted heredoc")
                lines.append(check + "\n")
            body = "".join(lines)
            parts: tuple[Part, ...] = ()
            if not doc.quoted:
                sub = _Parser(body, bash=self.bash, depth=self.depth + 1)
                try:
                    parts = tuple(_merge(sub._double_quoted(heredoc=True)))
                except ShellSyntaxError as exc:
                    raise self.error(f"inside a heredoc: {exc.reason}", body_start) from exc
            doc.body, doc.parts = body, parts

    # -- grammar ---------------------------------------------------------------------------

    def _reserved(self, tok: _Tok) -> str | None:
        if tok.kind != "word" or tok.word is None:
            return None
        return tok.word.unquoted_reserved()

    def skip_newlines(self) -> None:
        while self.peek().kind == "newline":
            self.next()

    def script(self, *, stop_ops: tuple[str, ...], stop_words: tuple[str, ...]) -> Script:
        pipelines: list[Pipeline] = []
        self.skip_newlines()
        while True:
            tok = self.peek()
            if tok.kind == "eof" or (tok.kind == "op" and tok.value in stop_ops):
                break
            if self._reserved(tok) in stop_words:
                break
            pipelines.extend(self.and_or())
            tok = self.peek()
            if (tok.kind == "op" and tok.value in (";", "&")) or tok.kind == "newline":
                self.next()
            else:
                break
            self.skip_newlines()
        return Script(tuple(pipelines))

    def and_or(self) -> list[Pipeline]:
        out = [self.pipeline()]
        while self.peek().kind == "op" and self.peek().value in ("&&", "||"):
            self.next()
            self.skip_newlines()
            out.append(self.pipeline())
        return out

    def pipeline(self) -> Pipeline:
        negated = False
        if self._reserved(self.peek()) == "!":
            self.next()
            negated = True
        commands = [self.command()]
        while self.peek().kind == "op" and self.peek().value == "|":
            self.next()
            self.skip_newlines()
            commands.append(self.command())
        return Pipeline(tuple(commands), negated)

    def expect_word(self, word: str) -> None:
        tok = self.next()
        if self._reserved(tok) != word:
            raise self.error(f"expected {word!r}", tok.start)

    def command(self) -> Command:
        tok = self.peek()
        if tok.kind == "op" and tok.value == "(":
            if tok.adjacent_paren and self.bash:
                raise self.error("'((' is arithmetic in bash", tok.start)
            self.next()
            body = self.script(stop_ops=(")",), stop_words=())
            if self.next().value != ")":
                raise self.error("an unclosed '('", tok.start)
            return Compound("subshell", (body,), redirects=self.redirects())
        reserved = self._reserved(tok)
        if reserved in _AMBIGUOUS:
            raise self.error(f"{reserved!r} is a bash keyword but a command in sh", tok.start)
        if reserved is not None and reserved in _RESERVED:
            return self.compound(reserved, tok)
        return self.simple()

    def compound(self, reserved: str, tok: _Tok) -> Compound:
        self.next()
        bodies: list[Script] = []
        words: list[Word] = []
        name: str | None = None
        if reserved == "{":
            bodies.append(self.script(stop_ops=(), stop_words=("}",)))
            self.expect_word("}")
            kind = "group"
        elif reserved == "if":
            kind = "if"
            bodies.append(self.script(stop_ops=(), stop_words=("then",)))
            self.expect_word("then")
            bodies.append(self.script(stop_ops=(), stop_words=("elif", "else", "fi")))
            while True:
                word = self._reserved(self.next())
                if word == "elif":
                    bodies.append(self.script(stop_ops=(), stop_words=("then",)))
                    self.expect_word("then")
                    bodies.append(self.script(stop_ops=(), stop_words=("elif", "else", "fi")))
                elif word == "else":
                    bodies.append(self.script(stop_ops=(), stop_words=("fi",)))
                    self.expect_word("fi")
                    break
                elif word == "fi":
                    break
                else:
                    raise self.error("an unclosed 'if'", tok.start)
        elif reserved in ("while", "until"):
            kind = reserved
            bodies.append(self.script(stop_ops=(), stop_words=("do",)))
            bodies.append(self._do_group())
        elif reserved == "for":
            kind = "for"
            name_tok = self.next()
            name = self._reserved(name_tok)
            if name is None or not _NAME_RE.fullmatch(name):
                raise self.error("a 'for' without a plain variable name", name_tok.start)
            self.skip_newlines()
            if self._reserved(self.peek()) == "in":
                self.next()
                while (item := self.peek()).word is not None:
                    self.next()
                    words.append(item.word)
                sep = self.next()
                if not (sep.kind == "newline" or (sep.kind == "op" and sep.value == ";")):
                    raise self.error("a 'for' list must end with ';' or a newline", sep.start)
            elif self.peek().kind == "op" and self.peek().value == ";":
                self.next()
            self.skip_newlines()
            bodies.append(self._do_group())
        elif reserved == "case":
            kind = "case"
            bodies, words = self._case()
        else:
            raise self.error(f"unexpected {reserved!r}", tok.start)
        return Compound(kind, tuple(bodies), tuple(words), self.redirects(), name)

    def _do_group(self) -> Script:
        self.expect_word("do")
        body = self.script(stop_ops=(), stop_words=("done",))
        self.expect_word("done")
        return body

    def _case(self) -> tuple[list[Script], list[Word]]:
        subject = self.next()
        if subject.kind != "word" or subject.word is None:
            raise self.error("a 'case' without a word", subject.start)
        words = [subject.word]
        bodies: list[Script] = []
        self.skip_newlines()
        self.expect_word("in")
        self.skip_newlines()
        while self._reserved(self.peek()) != "esac":
            if self.peek().kind == "op" and self.peek().value == "(":
                self.next()
            while True:
                pattern = self.next()
                if pattern.kind != "word" or pattern.word is None:
                    raise self.error("a 'case' pattern expected", pattern.start)
                words.append(pattern.word)
                sep = self.next()
                if sep.kind == "op" and sep.value == ")":
                    break
                if not (sep.kind == "op" and sep.value == "|"):
                    raise self.error("a 'case' pattern must end with ')'", sep.start)
            bodies.append(self.script(stop_ops=(";;",), stop_words=("esac",)))
            if self.peek().kind == "op" and self.peek().value == ";;":
                self.next()
                self.skip_newlines()
            elif self._reserved(self.peek()) != "esac":
                raise self.error("an unclosed 'case'", self.peek().start)
        self.next()
        return bodies, words

    def redirects(self) -> tuple[Redirect, ...]:
        out: list[Redirect] = []
        while self.peek().kind == "redir":
            out.append(self.redirect())
        return tuple(out)

    def redirect(self) -> Redirect:
        tok = self.next()
        target = self.next()
        if target.kind != "word" or target.word is None:
            raise self.error(f"a redirection {tok.value!r} without a target", target.start)
        word = target.word
        if tok.value in ("<<", "<<-"):
            delimiter = word.text
            if (any(not isinstance(p, Literal) for p in word.parts) or "\n" in delimiter
                    or "\\\n" in word.raw):
                raise self.error("a heredoc delimiter that expands", target.start)
            quoted = any(isinstance(p, Literal) and p.quoted for p in word.parts)
            doc = Heredoc(delimiter, quoted, tok.value == "<<-")
            self.pending.append(doc)
            return Redirect(tok.fd, tok.value, word, doc)
        return Redirect(tok.fd, tok.value, word)

    def simple(self) -> SimpleCommand | FunctionDef:
        start = self.peek().start
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            tok = self.peek()
            if tok.kind == "redir":
                redirects.append(self.redirect())
                continue
            if tok.kind != "word" or tok.word is None:
                break
            word = tok.word
            if not words:
                if _is_assignment(word):
                    self.next()
                    assignments.append(word)
                    continue
                reserved = word.unquoted_reserved()
                if (assignments or redirects) and reserved in (_RESERVED | _AMBIGUOUS):
                    raise self.error(f"{reserved!r} after an assignment or a redirection",
                                     tok.start)
                if re.match(r"[A-Za-z_][A-Za-z0-9_]*(\[|\+=)", word.raw):
                    raise self.error("an array or '+=' assignment", tok.start)
            self.next()
            words.append(word)
            nxt = self.peek()
            if nxt.kind == "op" and nxt.value == "(":
                return self._function(words, assignments, redirects, tok)
        if not (assignments or words or redirects):
            tok = self.peek()
            raise self.error(f"unexpected {tok.value or tok.kind!r}", tok.start)
        return SimpleCommand(tuple(assignments), tuple(words), tuple(redirects),
                             self.s[start:self.last_end])

    def _function(self, words: list[Word], assignments: list[Word],
                  redirects: list[Redirect], tok: _Tok) -> FunctionDef:
        name = words[0].unquoted_reserved()
        if len(words) != 1 or assignments or redirects or name is None:
            raise self.error("'(' after a command's words", tok.start)
        self.next()
        if self.next().value != ")":
            raise self.error("a function definition needs '()'", tok.start)
        self.skip_newlines()
        body = self.command()
        if not isinstance(body, Compound):
            raise self.error("a function body must be a compound command", tok.start)
        return FunctionDef(name, body)


def _is_assignment(word: Word) -> bool:
    first = word.parts[0]
    if not isinstance(first, Literal) or first.quoted:
        return False
    match = re.match(r"[A-Za-z_][A-Za-z0-9_]*=", first.text)
    return match is not None


def _merge(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    for part in parts:
        last = out[-1] if out else None
        if (isinstance(part, Literal) and isinstance(last, Literal)
                and last.quoted == part.quoted):
            out[-1] = Literal(last.text + part.text, part.quoted)
        else:
            out.append(part)
    return out


def parse(text: str, *, bash: bool) -> Script:
    """Read ``text`` as ``sh -c`` (``bash=False``) or ``bash -c`` would.

    Raises :class:`ShellSyntaxError` for a syntax error and for anything this
    reader does not read with certainty (see the module doc).
    """
    if "\x00" in text:
        raise ShellSyntaxError("a NUL character", text.index("\x00"))
    parser = _Parser(text, bash=bash, depth=0)
    try:
        script = parser.script(stop_ops=(), stop_words=())
    except RecursionError:
        raise ShellSyntaxError("nested too deeply", parser.i) from None
    tok = parser.next()
    if tok.kind != "eof":
        raise parser.error(f"unexpected {tok.value or tok.kind!r}", tok.start)
    if parser.pending:
        raise parser.error("a heredoc without a body")
    return script

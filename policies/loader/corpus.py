"""Load a corpus of real definition files (``tests/corpus`` layout) for checks and benchmarks.

A corpus directory holds ``SOURCES.tsv`` (columns ``format, saved_file, repo,
path, commit, note``) and the files it names, saved under flattened names.
Each file is loaded as its format would see it in its original place: its
original file name decides whether it is an agent file at all (a README is
skipped), config files (``opencode.json``, Codex ``config.toml``) are read as
such, and a Codex role file gets the role declarations of the
``config.toml`` saved from the same repository directory.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from policies.contract import AgentFormat, Scope
from policies.loader.base import Options
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.codex import parse_declarations
from policies.loader.single import FileOutcome, load_file

__all__ = ["CONFIG_NAMES", "CorpusEntry", "load_corpus"]

CONFIG_NAMES = frozenset({"opencode.json", "opencode.jsonc", "config.toml", "zuno.json"})


@dataclass(frozen=True)
class CorpusEntry:
    """One row of ``SOURCES.tsv``."""

    format: AgentFormat
    saved_file: str
    repo: str
    path: str
    note: str

    @property
    def display(self) -> str:
        """``owner/repo/original/path`` as diagnostics show it."""
        return f"{self.repo}/{self.path}"


def entries(corpus: Path) -> list[CorpusEntry]:
    """The rows of ``SOURCES.tsv`` whose file is present."""
    with (corpus / "SOURCES.tsv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [
        CorpusEntry(AgentFormat(row["format"]), row["saved_file"], row["repo"], row["path"],
                    row.get("note") or "")
        for row in rows
        if (corpus / row["saved_file"]).exists() or (corpus / row["saved_file"]).is_symlink()
    ]


def _declarations(corpus: Path, rows: list[CorpusEntry]) -> dict[tuple[str, str], dict[str, str]]:
    """(repo, role file path) -> what that repo's ``.codex/config.toml`` declares."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        path = PurePosixPath(row.path)
        if row.format is not AgentFormat.CODEX or path.name != "config.toml":
            continue
        try:
            declared = parse_declarations(decode_text(read_bounded(corpus / row.saved_file)))
        except DefinitionRejected:
            continue
        for config_file, facts in declared.items():
            role = (path.parent / config_file).as_posix()
            out[(row.repo, role.removeprefix("./"))] = facts
    return out


def load_corpus(corpus: Path, options: Options | None = None,
                ) -> Iterator[tuple[CorpusEntry, FileOutcome]]:
    """Load every file of the corpus, in ``SOURCES.tsv`` order."""
    rows = entries(corpus)
    declared = _declarations(corpus, rows)
    for row in rows:
        name = PurePosixPath(row.path).name
        yield row, load_file(
            corpus / row.saved_file, row.format, scope=Scope.IMPORT, display=row.display,
            options=options, file_name=name, skip_non_agents=name not in CONFIG_NAMES,
            declared=declared.get((row.repo, row.path)), location_name=_location(row),
        )


def _location(row: CorpusEntry) -> str | None:
    """The identity a file's place gives it, where the format uses the place."""
    path = PurePosixPath(row.path)
    if row.format in {AgentFormat.OPENCODE, AgentFormat.ZUNO}:
        parts = path.parts
        for index in range(len(parts) - 2, -1, -1):
            if parts[index] in {"agent", "agents"}:
                return PurePosixPath(*parts[index + 1 :]).with_suffix("").as_posix()
    if row.format in {AgentFormat.NGN, AgentFormat.ANTIGRAVITY} and path.name == "agent.md":
        return path.parent.name
    return None

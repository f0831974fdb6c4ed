"""Loader diagnostics: every problem names the file, the line, the field and the reason.

``error`` means the definition was rejected; ``warning`` means it loaded with
a caveat (``--strict`` turns warnings into rejections); ``info`` notes
something the loader did on purpose (a README skipped, a collision resolved).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from policies.errors import PolicyError

__all__ = ["DefinitionRejected", "Diagnostic", "Severity"]


class Severity(StrEnum):
    """How serious a diagnostic is."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Diagnostic(BaseModel):
    """One finding about one file."""

    #: Built on the first finding: a clean listing reports none.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    file: str
    line: int
    field: str
    severity: Severity
    reason: str
    hint: str | None = None
    code: str = "definition"

    def render(self) -> str:
        """``file:line: field: reason`` (plus the hint, when there is one)."""
        text = f"{self.file}:{self.line}: {self.field}: {self.reason}"
        return f"{text} (hint: {self.hint})" if self.hint else text

    def to_json(self) -> dict[str, object]:
        """The JSON shape of ``agents list --json``."""
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "severity": self.severity.value,
            "reason": self.reason,
            "hint": self.hint,
            "code": self.code,
        }


class DefinitionRejected(PolicyError):
    """Raised inside an adapter to stop reading a definition that cannot load."""

    code = "definition_rejected"

    def __init__(
        self,
        field: str,
        reason: str,
        *,
        line: int | None = None,
        hint: str | None = None,
        code: str = "definition",
    ) -> None:
        super().__init__(f"{field}: {reason}", hint=hint)
        self.field = field
        self.reason = reason
        self.line = line
        self.diag_code = code

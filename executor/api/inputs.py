"""What a caller hands the API: a cancellation token and scripted replays.

- :class:`CancelToken`: cancel a run or a fanout from any thread (a signal
  handler, a UI, an ``asyncio`` task); every child of the tree stops its
  running command now, ends ``cancelled`` at its next step and keeps its diff.
- :class:`Replay`: a scripted model (YAML turns), read from a file or given as
  text, validated when it is made (no model key needed: the README's examples
  and the tests run on them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from executor.errors import ExecutorError, ModelError
from executor.scheduling import Cancellation

if TYPE_CHECKING:
    from executor.models import ScriptedModel

__all__ = ["CancelToken", "Replay"]

_SCRIPT_HINT = ("a script is a YAML list of turns: {text: ...} or {tool_calls: [{name, "
                "arguments}]}")


class CancelToken(Cancellation):
    """Cancels what it is passed to (``Corral.run(cancel=...)``, ``Corral.fanout``), from
    any thread, once (the first reason wins).

    A run that is cancelled stops its running command at once, ends ``cancelled`` at its
    next step, and its diff is recorded as usual; a fanout's children that had not
    started get a record saying so.
    """

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Cancel, with ``reason`` in each cancelled run's record."""
        super().cancel(reason)


def _bad_script(exc: ModelError) -> ExecutorError:
    return ExecutorError(exc.message, code="bad_script", operation="load_script",
                         context=exc.context, hint=exc.hint or _SCRIPT_HINT)


@dataclass(frozen=True)
class Replay:
    """A scripted model's turns and where they came from (``source`` names them in errors
    and in records). Each run (each fanout child) plays its own copy from the first turn.

    Make one with :meth:`from_file` or :meth:`from_text`: both validate the turns and
    raise :class:`~executor.errors.ExecutorError` ``bad_script`` (exit code 2) when
    they are not a script.
    """

    turns: tuple[object, ...]
    source: str

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Replay:
        """The replay in the YAML file ``path``."""
        import yaml  # noqa: PLC0415 - only where a replay is read

        file = Path(path)
        scripted(file)  # validated as a run reads it: the same errors
        return cls(tuple(yaml.safe_load(file.read_text(encoding="utf-8"))), str(file))

    @classmethod
    def from_text(cls, text: str, *, source: str = "<script>") -> Replay:
        """The replay whose YAML is ``text``."""
        import yaml  # noqa: PLC0415 - only where a replay is read

        from executor.models import ScriptedModel  # noqa: PLC0415 - the run machinery

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ExecutorError(f"{source}: not valid YAML: {exc}", code="bad_script",
                                operation="load_script", context={"script": source},
                                hint=_SCRIPT_HINT) from exc
        try:
            ScriptedModel(data, source=source)
        except ModelError as exc:
            raise _bad_script(exc) from exc
        return cls(tuple(data), source)

    def model(self) -> ScriptedModel:
        """A fresh model that plays these turns from the first."""
        from executor.models import ScriptedModel  # noqa: PLC0415 - the run machinery

        return ScriptedModel(list(self.turns), source=self.source)


def scripted(path: Path) -> ScriptedModel:
    """The scripted model of a replay file, or the user error it is when it is missing or
    malformed (``bad_script``, exit 2)."""
    from executor.models import ScriptedModel  # noqa: PLC0415 - the run machinery

    try:
        return ScriptedModel.from_file(path)
    except ModelError as exc:
        raise _bad_script(exc) from exc

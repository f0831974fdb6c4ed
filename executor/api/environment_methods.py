"""The project-environment methods of :class:`executor.api.Corral` (kept apart for size)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from executor.api.environments import BuiltEnvironment
    from sandbox.environment import EnvironmentInfo

__all__ = ["EnvironmentMethods"]


class EnvironmentMethods:
    """``build_environment``, ``environments`` and ``prune_environments``."""

    # -- the project's environment ---------------------------------------------------------

    def build_environment(self, *, setup_network: bool | None = None, rebuild: bool = False,
                          on_output: Callable[[str], None] | None = None,
                          on_warning: Callable[[str], None] | None = None,
                          ) -> BuiltEnvironment | None:
        """Prepare the project's environment now, so the next run pays nothing (``None``:
        none is described). A failed setup is ``environment_setup_failed`` (exit 5)."""
        from executor.api.environments import build  # noqa: PLC0415
        return build(cast("Corral", self), setup_network=setup_network, rebuild=rebuild,
                     on_output=on_output, on_warning=on_warning)

    def environments(self) -> list[EnvironmentInfo]:
        """The cached environments, most recently used first."""
        from executor.api.environments import listed  # noqa: PLC0415
        return listed(cast("Corral", self))

    def prune_environments(self, keys: Sequence[str] = (), *,
                           older_than: str | float | None = None,
                           everything: bool = False) -> list[EnvironmentInfo]:
        """Remove cached environments no live sandbox runs in (those whose key starts with
        one of ``keys``, those unused for ``older_than``, or ``everything``); what went."""
        from executor.api.environments import prune  # noqa: PLC0415
        return prune(cast("Corral", self), keys, older_than=older_than, everything=everything)

"""The memory every sandbox of a :class:`~executor.api.Corral` gets.

``Corral(memory=...)`` (``--memory``) over ``[sandbox] memory`` of your corral config over
the backend config's own (half of this machine's memory: :mod:`sandbox.config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from executor.errors import ExecutorError
from policies.config import load_user_config, parse_memory

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from sandbox.config import BackendConfig

__all__ = ["checked_memory", "sized"]


def checked_memory(memory: str | int | None) -> int | None:
    """A ``memory`` argument in bytes; a bad one is a ``usage_error`` before anything."""
    try:
        return None if memory is None else parse_memory(memory)
    except ValueError as exc:
        raise ExecutorError(f"memory: {exc}", code="usage_error", operation="check_arguments",
                            hint='give a size such as "4G", or leave it out (half of this '
                            "machine's memory, or [sandbox] memory)") from exc


def sized(corral: Corral, config: BackendConfig) -> BackendConfig:
    """``config`` with the memory every sandbox gets: the Corral's ``memory``, else (for a
    backend given by name) ``[sandbox] memory`` of your corral config, else its own."""
    memory = corral.memory
    if memory is None and isinstance(corral.backend, str):
        memory = load_user_config().sandbox.memory
    if memory is None:
        return config
    return config.model_copy(update={
        "limits": config.limits.model_copy(update={"memory_bytes": memory})})

"""The one module that imports Ray (an optional extra: ``pip install 'corral[ray]'``).

:func:`import_ray` imports it when a Ray scheduler is made (and on a node, when
a task runs), or says how to install it; :func:`parse_target` reads ``--on``;
:func:`connect` joins the cluster (or keeps a connection the process made) and
checks that some node can sandbox a child.
"""

from __future__ import annotations

from typing import Any

from executor.errors import ExecutorError
from executor.scheduling.node import RESOURCE

__all__ = ["INSTALL", "RayMissing", "connect", "import_ray", "parse_target"]

INSTALL = "pip install 'corral[ray]'"


class RayMissing(ExecutorError):
    """``--on ray`` without Ray installed, or without a cluster to run on."""

    code = "ray_unavailable"
    exit_code = 2


def import_ray() -> Any:
    """The ``ray`` module, or :class:`RayMissing` saying how to install it."""
    try:
        import ray  # noqa: PLC0415 - an optional extra, imported only when used
    except ImportError as exc:
        raise RayMissing("running children on Ray needs the ray package, which is not "
                         "installed", operation="connect_ray", hint=f"install it: {INSTALL}"
                         ) from exc
    return ray


def parse_target(on: str) -> str | None:
    """``ray`` (the cluster ``RAY_ADDRESS`` or ``ray start`` names) -> ``None``;
    ``ray://HOST:PORT`` (a cluster's GCS address) -> ``HOST:PORT``."""
    if on == "ray":
        return None
    if on.startswith("ray://") and len(on) > len("ray://"):
        return on.removeprefix("ray://")
    raise ExecutorError(f"--on {on!r} names no place to run children", code="usage_error",
                        operation="check_arguments",
                        hint="--on local (this machine), ray (RAY_ADDRESS) or ray://HOST:PORT")


def connect(ray: Any, address: str | None) -> None:
    if ray.is_initialized():
        return
    try:
        ray.init(address=address or "auto", log_to_driver=False, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayMissing(f"could not connect to the Ray cluster at {address or 'auto'}: {exc}",
                         operation="connect_ray",
                         hint="start one (`ray start --head`), or name it: --on ray://HOST:PORT"
                         ) from exc
    if not ray.cluster_resources().get(RESOURCE):
        raise RayMissing(
            f"no node of the Ray cluster offers {RESOURCE!r}: none can sandbox a child",
            operation="connect_ray",
            hint='start nodes with --resources "$(python -m executor.scheduling.node)"')

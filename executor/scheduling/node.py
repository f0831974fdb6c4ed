"""What a cluster node offers corral: its sandbox resource, probed, and a directory of its own.

A node may run fanout children only if an isolating backend works on it
(bubblewrap, else docker: :func:`sandbox.factory.resolve_backend`, which never
picks ``host``). :func:`node_resources` probes that and says what the node
advertises to Ray: ``{"corral_sandbox": slots}``, or nothing when no backend
works, so the scheduler (which asks one unit of that resource per child) never
places a child there. Start each node with it::

    ray start --address HEAD:6379 --resources "$(python -m executor.scheduling.node)"

(``--slots N`` sets how many children the node runs at once, default 4;
``--backend docker`` probes docker alone; ``--bwrap PATH`` names bubblewrap.)

:func:`node_place` is the node's own directory for corral (its state dir, the
snapshot repositories unpacked from bundles, its ledger): under a base,
``$CORRAL_RAY_DIR``, else ``$XDG_RUNTIME_DIR/corral-ray`` when that is a
directory of this user's with no group or other bits, else
``<tmp>/corral-ray-<euid>``, one directory per Ray node id, so two nodes on one
machine never share one. Nothing of the driver's filesystem is assumed to be
there.

Another local user could make those directories first (in the temp dir anyone can)
and then read the shipped snapshots and config or rewrite a diff before the node
packs it, so they are private by construction: the base and the node's directory
are made ``0700`` when missing and checked with ``os.lstat`` on every use (owned by
this user, not a symlink, no group or other bits); anything else is refused
(``private_dir_unsafe``, naming the path and what is wrong), never tightened or
followed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from sandbox.config import USER_BACKENDS, AutoConfig, BubblewrapConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import resolve_backend
from sandbox.state import private_dir, private_problem

__all__ = ["DEFAULT_SLOTS", "RESOURCE", "node_place", "node_resources"]

#: The custom Ray resource of a node that can sandbox children (one unit per child).
RESOURCE = "corral_sandbox"
#: Children a node runs at once when its operator does not say.
DEFAULT_SLOTS = 4


def node_resources(*, backend: str = "auto", slots: int = DEFAULT_SLOTS,
                   bwrap: str | None = None) -> dict[str, float]:
    """``{RESOURCE: slots}`` when ``backend`` works on this machine, else ``{}``
    (``bwrap``: the bubblewrap executable, when not ``bwrap`` on ``PATH``)."""
    if backend == "host" or backend not in USER_BACKENDS:
        return {}  # host isolates nothing: a node never offers it
    config = USER_BACKENDS[backend]()
    if bwrap is not None and isinstance(config, BubblewrapConfig):
        config = config.model_copy(update={"bwrap": bwrap})
    elif bwrap is not None and isinstance(config, AutoConfig):
        config = config.model_copy(update={"bubblewrap": config.bubblewrap.model_copy(
            update={"bwrap": bwrap})})
    try:
        resolve_backend(config)
    except BackendUnavailable:
        return {}
    return {RESOURCE: float(slots)}


_HINT = ("remove it if it is not yours (another local user may have made it to read or "
         "change what the node keeps there), or set CORRAL_RAY_DIR to a directory of your "
         "own with mode 0700")


def _base() -> Path:
    """The directory the nodes' own directories are made in, checked (see the module
    docstring)."""
    explicit = os.environ.get("CORRAL_RAY_DIR")
    if explicit:
        base = Path(explicit).absolute()  # never resolved: a symlink is refused
        private_dir(base, parents=True, verify=True, hint=_HINT)
        return base
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute() and private_problem(Path(runtime)) is None:
        base = Path(runtime) / "corral-ray"
    else:
        base = Path(tempfile.gettempdir()) / f"corral-ray-{os.geteuid()}"
    private_dir(base, verify=True, hint=_HINT)
    return base


def node_place(node_id: str) -> Path:
    """This node's own directory for corral (made ``0700``, checked on every call: see the
    module docstring; :class:`~sandbox.state.PrivateDirUnsafe` when it is not private)."""
    if not re.fullmatch(r"[0-9a-fA-F]{8,64}", node_id):
        raise ValueError(f"not a Ray node id: {node_id!r}")
    place = _base() / node_id[:16]
    private_dir(place, verify=True, hint=_HINT)
    return place


def main(argv: list[str] | None = None) -> int:
    """Print this node's resources as JSON (for ``ray start --resources``)."""
    parser = argparse.ArgumentParser(prog="python -m executor.scheduling.node")
    parser.add_argument("--backend", default="auto", choices=["auto", "bubblewrap", "docker"])
    parser.add_argument("--slots", type=int, default=DEFAULT_SLOTS)
    parser.add_argument("--bwrap", help="the bubblewrap executable (default: bwrap on PATH)")
    args = parser.parse_args(argv)
    resources = node_resources(backend=args.backend, slots=max(args.slots, 1), bwrap=args.bwrap)
    sys.stdout.write(json.dumps(resources) + "\n")
    if not resources:
        sys.stderr.write("corral: no isolating backend works here; this node gets no child\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

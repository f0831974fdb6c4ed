"""The project's environment ahead of time: built, listed, pruned (``corral env``).

Built once per key (a digest of its description, its inputs' content, the
backend, the uid, the image and the workspace's path inside the sandbox, not
the checkout's: a fresh clone of the same project shares it) and then shared by
every run, fanout child, check and reviewer with that key; a failed setup names
its cause (``environment_setup_failed``, ``cause`` in its context and in ``corral
env show``). See the README's "Your project's environment".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from executor.agents.registry import load
from executor.api.running import usage
from executor.ledger import parse_duration
from executor.run import RunSettings, describe, with_environment
from policies.config import config_path, load_user_config
from policies.loader import Diagnostic, Environment
from sandbox.environment import EnvironmentInfo, list_environments, prune_environments
from sandbox.state import check_state_dir

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from sandbox.environment import EnvironmentRef

__all__ = ["BuiltEnvironment", "build", "listed", "prune"]


@dataclass(frozen=True)
class BuiltEnvironment:
    """An environment ready for runs: its ``ref`` (what children get) and what ``corral env
    show`` lists of it (``info``; ``None`` when it is not under the state dir)."""

    ref: EnvironmentRef
    info: EnvironmentInfo | None

    @property
    def key(self) -> str:
        return self.ref.key


def build(corral: Corral, *, setup_network: bool | None, rebuild: bool,
          on_output: Callable[[str], None] | None,
          on_warning: Callable[[str], None] | None) -> BuiltEnvironment | None:
    """:meth:`Corral.build_environment`."""
    ledger = corral.ledger()
    registry = load(corral.sources())
    settings = RunSettings(root=corral.root.resolve(), backend=corral.backend_config(),
                           config=load_user_config(), registry=registry, ledger=ledger,
                           env=Environment.from_env(), trust_project=corral.trust_project,
                           config_file=config_path(), state_root=corral.state_dir)
    spec, _ = describe(settings, network=setup_network)
    if spec is None:
        return None

    def warn(diagnostic: Diagnostic) -> None:
        if on_warning is not None:
            on_warning(diagnostic.render())

    prepared = with_environment(settings, network=setup_network, on_output=on_output,
                                warn=warn, rebuild=rebuild)
    ref = prepared.environment
    assert ref is not None  # noqa: S101 - a described environment was prepared
    info = next((i for i in list_environments(settings.state_root) if i.key == ref.key), None)
    return BuiltEnvironment(ref, info)


def listed(corral: Corral) -> list[EnvironmentInfo]:
    """:meth:`Corral.environments`."""
    state_root = corral.state_root()
    check_state_dir(state_root)
    return list_environments(state_root)


def prune(corral: Corral, keys: Sequence[str], *, older_than: str | float | None,
          everything: bool) -> list[EnvironmentInfo]:
    """:meth:`Corral.prune_environments`."""
    if not keys and older_than is None and not everything:
        raise usage("name the environments to remove, or give older_than or everything",
                    "corral env show lists them")
    state_root = corral.state_root()
    check_state_dir(state_root)
    age = parse_duration(older_than) if isinstance(older_than, str) else older_than
    return prune_environments(state_root, older_than=age, keys=tuple(keys))

"""The hosts a :class:`~executor.api.Corral`'s runs may fetch from: ``[network]`` of your
corral config, and ``Corral(allow_net=...)`` (``--allow-net DOMAIN``) on top of it.

Only you grant them: a repository's files and an agent's definition never add a
host (:mod:`policies.network`). A bad pattern is a ``usage_error`` before anything ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from executor.errors import ExecutorError
from policies.config import UserConfig
from policies.network import check_pattern

__all__ = ["NET_CHOICES", "check_egress", "checked_allow_net", "checked_net", "with_allow_net"]

#: ``--net``: ``none`` (commands have no network, the default) or ``allow`` (they reach the
#: user's granted hosts through corral's filtering proxy, :mod:`sandbox.egress`).
NET_CHOICES = ("none", "allow")


def checked_net(net: str) -> str:
    """``net`` if it is one of :data:`NET_CHOICES`; else a ``usage_error``."""
    if net not in NET_CHOICES:
        raise ExecutorError(f"net {net!r} is not one of {', '.join(NET_CHOICES)}",
                            code="usage_error", operation="check_arguments",
                            context={"net": net}, hint="--net allow opens what your [network] "
                            "allow grants to the run's commands; --net none (the default) "
                            "keeps them offline")
    return net


def check_egress(net: str, config: UserConfig) -> bool:
    """Whether a run's commands get the egress proxy; ``--net allow`` with nothing granted
    is a ``usage_error`` before anything ran (it would open nothing)."""
    if net != "allow":
        return False
    if not config.network.allow:
        raise ExecutorError("--net allow opens what your [network] allow grants, and you "
                            "granted no host", code="usage_error", operation="check_arguments",
                            hint="add [network] allow = [\"pypi.org\", ...] to your corral "
                            "config, or pass --allow-net DOMAIN")
    return True


def checked_allow_net(allow_net: Sequence[str]) -> tuple[str, ...]:
    """``allow_net`` as canonical patterns; a bad one is a ``usage_error`` naming it."""
    if isinstance(allow_net, str):
        allow_net = (allow_net,)
    patterns = []
    for pattern in allow_net:
        try:
            patterns.append(check_pattern(pattern))
        except ValueError as exc:
            raise ExecutorError(f"allow_net: {exc}", code="usage_error",
                                operation="check_arguments", context={"pattern": pattern},
                                hint="grant a host: docs.python.org, *.pypi.org (its "
                                "subdomains), host:8080, or an exact IP address") from exc
    return tuple(patterns)


def with_allow_net(config: UserConfig, allow_net: Sequence[str]) -> UserConfig:
    """``config`` with ``allow_net`` added to its ``[network] allow``."""
    if not allow_net:
        return config
    network = config.network.model_copy(
        update={"allow": tuple(dict.fromkeys((*config.network.allow, *allow_net)))})
    return config.model_copy(update={"network": network})

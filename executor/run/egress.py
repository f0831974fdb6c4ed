"""A run's allow-listed egress (``--net allow``): the proxy its sandbox's commands reach.

Opt-in per run (:attr:`RunSettings.egress`), it opens what the user's grant
(``[network] allow``, ``--allow-net``) allows and never more; a definition can
only narrow it: an agent without the shell gets no proxy (nothing of it could
use one), and one whose rules deny ``web_fetch`` outright keeps its sandbox
offline. Every decision of the proxy goes to the run's journal (``egress``
events) and the record's ``network`` (:meth:`EgressProxy.summary`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from executor.agents.offer import egress_refusal
from sandbox.egress import EgressProxy

if TYPE_CHECKING:
    from executor.run.agent import AgentRun

__all__ = ["open_egress"]


def open_egress(run: AgentRun) -> tuple[EgressProxy | None, str | None]:
    """The proxy of ``run``'s sandbox (``None``: no route out), and a note for its record."""
    if not run.settings.egress:
        return None, None
    grant = run.settings.config.network.grant()  # the user's only (--allow-net is in it)
    refusal = egress_refusal(run.capability, run.contract, grant)
    if refusal is not None:
        return None, f"--net allow: {refusal}"

    def journal(event: dict[str, Any]) -> None:
        if run.journal is not None:
            run.journal.event("egress", **event)

    proxy = EgressProxy(grant, on_event=journal)
    allowed = grant.to_json()
    return proxy, ("--net allow: commands reach " + ", ".join(allowed["allow"])
                   + (f" (denied: {', '.join(allowed['deny'])})" if allowed["deny"] else "")
                   + " through corral's proxy, nothing else")

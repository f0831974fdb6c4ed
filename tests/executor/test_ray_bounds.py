"""The Ray scheduler's bounds (issue 33): what a node's job may pile up in the driver's flag
actor, how many jobs the cluster runs at once, how often a lost job is tried.

The flag's bounds are those of :class:`executor.scheduling.raytask.Flag` (the actor's
class) and of the node's relay; the scheduler's are tested on a real local Ray cluster bound
to 127.0.0.1 (one head with no sandbox resource, one worker offering more units than the
jobs bound), with jobs whose ``there`` waits on files this test creates.
"""

from __future__ import annotations

from executor.scheduling.raytask import MAX_PENDING, Flag, _Relay


def test_the_flag_keeps_at_most_max_pending_events_of_a_job() -> None:
    """A job that reports without end (a child printing in a loop) fills neither the
    driver's actor nor its node's relay past MAX_PENDING; other jobs keep their own room."""
    flag = Flag()
    flag.post("s", "a", list(range(MAX_PENDING + 10)))
    flag.post("s", "a", ["more"])
    flag.post("s", "b", ["b's"])
    taken = flag.take("s")
    assert taken["a"] == list(range(MAX_PENDING)) and taken["b"] == ["b's"]
    assert flag.take("s") == {}
    relay = _Relay(flag, "s", "a")
    for n in range(MAX_PENDING + 10):
        relay.report(n)
    assert relay.events == list(range(MAX_PENDING))

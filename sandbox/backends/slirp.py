"""slirp4netns: a sandbox's own network, with no route to this machine's loopback.

An environment's setup granted network (and only it: children never get one) gets a
network namespace of its own, on bubblewrap (the supervisor's) and on docker (the
container's, created with ``--network none``): :class:`Slirp` joins it by its path and
routes a tap device out through a user-space TCP/IP stack with
``--disable-host-loopback``, so what listens on this machine's 127.0.0.1 (``corral
serve``, ``corral mcp --http``, a Ray head, a local database) is never reached, and the
rest of the network is reached as this machine reaches it. The namespace's
``/etc/resolv.conf`` names slirp's DNS forwarder (:data:`SLIRP_DNS`).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess

from sandbox.errors import SandboxError

__all__ = ["SLIRP_DNS", "Slirp"]

#: slirp4netns's addresses: its DNS forwarder, and the host seen from inside (refused
#: with --disable-host-loopback: nothing listening on this machine's 127.0.0.1 is reached).
SLIRP_DNS = "10.0.2.3"
_SLIRP_READY_SECONDS = 30.0


class Slirp:
    """slirp4netns on a sandbox's network namespace: a tap device routed out through a user
    space TCP/IP stack, with no route to the host's loopback (``--disable-host-loopback``).
    It ends when its exit descriptor closes: at :meth:`stop`, or with corral."""

    def __init__(self, popen: subprocess.Popen[bytes], exit_w: int) -> None:
        self.popen, self.exit_w = popen, exit_w

    @classmethod
    def start(cls, slirp: str, pid: int | None) -> Slirp:
        if pid is None:
            raise SandboxError("the sandbox's namespace was not found for its network",
                               code="network_failed", operation="start")
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        os.set_inheritable(exit_w, False)
        try:
            popen = subprocess.Popen(  # noqa: S603 - a fixed argv
                # The namespace by its path, joined from here: slirp's default joins the
                # target's user namespace first, bwrap's --disable-userns one, where no
                # capability over the network namespace is left.
                [slirp, "--netns-type=path", "--configure", "--mtu=65520",
                 "--disable-host-loopback", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}",
                 f"/proc/{pid}/ns/net", "tap0"],
                pass_fds=(ready_w, exit_r), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            for fd in (ready_r, ready_w, exit_r, exit_w):
                os.close(fd)
            raise SandboxError(f"slirp4netns did not start: {exc}", code="network_failed",
                               operation="start") from exc
        os.close(ready_w)
        os.close(exit_r)
        network = cls(popen, exit_w)
        try:
            ready, _, _ = select.select([ready_r], [], [], _SLIRP_READY_SECONDS)
            said = os.read(ready_r, 1) if ready else b""
        finally:
            os.close(ready_r)
        if said != b"1":
            network.stop(keep_stderr=True)
            why = (popen.stderr.read() if popen.stderr else b"").decode("utf-8", "replace")
            if popen.stderr is not None:
                popen.stderr.close()
            raise SandboxError(f"slirp4netns did not set up the network: {why.strip()[:300]}",
                               code="network_failed", operation="start")
        return network

    def stop(self, *, keep_stderr: bool = False) -> None:
        with contextlib.suppress(OSError):
            os.close(self.exit_w)
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stderr is not None and not keep_stderr:
            self.popen.stderr.close()

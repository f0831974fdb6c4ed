"""Why an environment's setup failed, told from the failing command's result and log tail.

A failed setup (:func:`sandbox.environment.prepare_environment`) names its
**cause**, so the hint says what to change instead of "fix the setup":

- ``timeout``: setup ran past ``setup_timeout``;
- ``out_of_memory``: the sandbox's memory cap was reached (the memory cgroup's OOM
  kill, :attr:`sandbox.results.ExecResult.oom_killed`, or an allocation that failed
  where only a per-process rlimit could be had);
- ``command_not_found``: exit 127, or a shell's ``NAME: not found`` in the tail
  (a tool the sandbox's system or image lacks, or a path an earlier command did not make);
- ``no_network``: a name that did not resolve or a network that was unreachable while
  setup was not granted network (``setup_network``); ``network_failed`` when it was;
- ``command_failed``: anything else (the log says why).

Only the failing command's own output is read (its last :data:`TAIL_BYTES`), never
an earlier command's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sandbox.results import ExecResult

__all__ = ["NEEDS_NETWORK", "TAIL_BYTES", "Cause", "SetupFailure", "classify", "timed_out"]

Cause = Literal["timeout", "out_of_memory", "command_not_found", "no_network",
                "network_failed", "command_failed"]
#: How much of the failing command's output is read for its cause.
TAIL_BYTES = 64 * 1024
#: The hint of a setup that failed for want of the network it was not granted.
NEEDS_NETWORK = ("setup needs the network: grant `setup_network = true` in your config's "
                 "[environment] or pass --setup-network")

#: What resolvers and clients print when there is no network (glibc, curl, wget, git, apt,
#: pip/urllib3, npm/yarn/node, cargo, go).
_NO_NETWORK = re.compile(
    r"temporary failure in name resolution|temporary failure resolving|could not resolve host"
    r"|couldn't resolve host|unable to resolve host|name or service not known"
    r"|network is unreachable|failed to establish a new connection|no such host"
    r"|\benotfound\b|\beai_again\b|getaddrinfo", re.IGNORECASE)
#: What a registry client prints when it reached no index at all, which without network is
#: the network (pip with ``--retries 0`` says no more; with network it may be a bad name).
_NO_INDEX = re.compile(r"\(from versions: none\)|\bERR_INTERNET_DISCONNECTED\b"
                       r"|\bENETUNREACH\b|\bEHOSTUNREACH\b")
#: A shell's "not found" (dash: ``sh: 1: NAME: not found``; bash: ``bash: NAME: command not
#: found``; ``exec: NAME: not found``).
_NOT_FOUND = re.compile(r"^[^\n]*?:\s*([^\s:]+): (?:command )?not found\s*$", re.MULTILINE)
#: What a failed allocation prints where memory is capped per process (``RLIMIT_AS``).
_NO_MEMORY = re.compile(r"\bMemoryError\b|Cannot allocate memory|std::bad_alloc"
                        r"|out of memory", re.IGNORECASE)


@dataclass(frozen=True)
class SetupFailure:
    """One failed setup command: the cause, what to say, and what to do."""

    cause: Cause
    #: ``\\`COMMAND\\` exited 1 (setup has no network)``: the error message's tail.
    summary: str
    hint: str
    #: The command that was not found (``command_not_found`` only).
    missing: str | None = None


def missing_command(text: str) -> str | None:
    """The last command a shell said it did not find in ``text`` (``sh: 1: NAME: not
    found``, bash's ``NAME: command not found``); ``None`` if it says none."""
    names = _NOT_FOUND.findall(text)
    return names[-1] if names else None


def _size(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            value = count / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} B"


def timed_out(command: str | None, seconds: float) -> SetupFailure:
    """Setup used up its ``setup_timeout`` (at or before ``command``)."""
    where = f"`{command}` timed out" if command else "setup ran out of time"
    return SetupFailure(
        "timeout", f"{where} (setup_timeout is {seconds:.0f}s)",
        "raise setup_timeout in your config's [environment], or make setup faster")


def _system(backend: str, image: str | None) -> str:
    if backend == "docker":
        return (f"the image {image} does not have it (install it in setup, or use an image "
                "that has it: `image` or `dockerfile` in [environment])")
    if backend == "bubblewrap":
        return ("the sandbox sees this machine's system (/usr) read-only and it is not there "
                "(install it in setup, into the workspace, or use the docker backend with an "
                "image that has it)")
    return "it is not on this machine's PATH (install it in setup, or on this machine)"


def classify(command: str, result: ExecResult, tail: bytes, *, network: bool, backend: str,
             image: str | None, memory_bytes: int | None) -> SetupFailure:
    """The cause of setup command ``command`` failing with ``result`` (``tail``: the end of
    its output), in a setup granted ``network`` or not, on ``backend`` (``image``: docker's)
    with the sandbox capped at ``memory_bytes``."""
    why = ("was stopped" if result.stopped else
           f"exited {result.exit_code}" if result.exit_code is not None else "failed")
    said = f"`{command}` {why}"
    text = tail[-TAIL_BYTES:].decode("utf-8", "replace")
    cap = f"the cap is {_size(memory_bytes)}" if memory_bytes else "no cap was set"
    if result.oom_killed or (memory_bytes and _NO_MEMORY.search(text)):
        return SetupFailure(
            "out_of_memory", f"{said}: setup ran out of memory ({cap})",
            f"setup ran out of memory ({cap}: raise [sandbox] memory in your config or "
            "pass --memory)")
    names = _NOT_FOUND.findall(text)
    if result.exit_code == 127 or (names and not _NO_NETWORK.search(text)):
        name = names[-1] if names else None
        if name is None:
            summary = f"{said}: a command of setup was not found"
            hint = "a command of setup was not found (the log names it)"
        elif "/" in name:
            summary = f"{said}: {name} was not found"
            hint = (f"a command of setup was not found: {name} (a path: did an earlier setup "
                     "command make it, in the workspace?)")
        else:
            summary = f"{said}: {name} was not found"
            hint = f"a command of setup was not found: {name}; {_system(backend, image)}"
        return SetupFailure("command_not_found", summary, hint, name)
    if not network and (_NO_NETWORK.search(text) or _NO_INDEX.search(text)):
        return SetupFailure("no_network", f"{said}: setup has no network (it was not granted)",
                            NEEDS_NETWORK)
    if _NO_NETWORK.search(text):
        return SetupFailure(
            "network_failed", f"{said}: setup could not reach a host (it had the network)",
            "check the host's name and that this machine reaches it; setup uses your "
            "HTTP_PROXY/HTTPS_PROXY/NO_PROXY as this machine does")
    return SetupFailure("command_failed", said,
                        "fix the setup or its inputs (the log shows the failing command's "
                        "output)")

"""What every front door that listens shares: a socket on the loopback address only.

``corral mcp --http`` and ``corral serve`` bind here, never to another address; the
socket is made (and its error said) before the server starts, so a port in use is a
clear error naming the address and the option that picks another one.
"""

from __future__ import annotations

import socket

from executor.api.errors import CorralError

__all__ = ["LOOPBACK", "loopback_socket"]

LOOPBACK = "127.0.0.1"


def loopback_socket(port: int, *, operation: str, option: str) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (never another address); ``port`` 0 picks one.
    ``option``: how the user picks another port (named in the error)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise CorralError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}",
                          code="listen_failed", operation=operation,
                          context={"address": f"{LOOPBACK}:{port}"},
                          hint=f"pick another port with {option} (0 picks a free one)",
                          ) from exc
    return sock

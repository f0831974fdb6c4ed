"""Run one sandboxed command from a process that has a controlling terminal (a pty).

Used by ``test_tiocsti_ioctl_fails_in_child``: prints ``parent-has-tty`` when the
pty is this process's terminal, then what the sandboxed child could do with
``/dev/tty``: ``child-has-no-tty`` (defended) or ``child-pushed-keys``.
"""

from __future__ import annotations

import os
import pty
import sys
from pathlib import Path

CHILD = """
import fcntl, os, termios
try:
    fd = os.open('/dev/tty', os.O_RDWR)
except OSError:
    print('child-has-no-tty')
else:
    fcntl.ioctl(fd, termios.TIOCSTI, b'x')
    print('child-pushed-keys')
"""


def _in_pty(backend: str, repo: Path, state_root: Path) -> None:
    from policies.contract import SandboxMode
    from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig
    from sandbox.factory import open_sandbox

    try:
        os.close(os.open("/dev/tty", os.O_RDWR))
        print("parent-has-tty", flush=True)
    except OSError:
        print("parent-has-no-tty", flush=True)
    configs = {"host": HostConfig, "bubblewrap": BubblewrapConfig, "docker": DockerConfig}
    with open_sandbox(configs[backend](), repo=repo, mode=SandboxMode.READ_ONLY,
                      state_root=state_root) as sb:
        result = sb.exec(["python3", "-c", CHILD])
    print(result.stdout.decode(), result.stderr.decode(), flush=True)


def main() -> int:
    backend, repo, state_root = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    pid, fd = pty.fork()
    if pid == 0:
        try:
            _in_pty(backend, repo, state_root)
        finally:
            os._exit(0)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the pty's other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(b"".join(chunks).decode("utf-8", "replace"))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())

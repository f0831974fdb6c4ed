"""The options of an overlay workspace's mount are in effect, seen from the host and the child.

``sandbox.workspaces.overlay.mount_overlay`` mounts each child's merged view
``nosuid,nodev`` with ``redirect_dir=nofollow,metacopy=off,index=off,xino=off,uuid=off``.
The merged view is a host path: without ``nosuid`` a setuid file a child plants there
runs with its owner's rights for whoever runs it on the host, until the sweep clears
it; without ``nodev`` a device node in it opens as that device, on the host and in a
container (docker's device cgroup allows ``/dev/null``'s 1:3). The other options keep
the upper layer to whole files, whiteouts and opaque directories (what
:mod:`sandbox.workspaces.upper` reads): the kernel shows an option in ``mountinfo`` only
where it differs from the overlay module's default, so a missing one is read from
``/sys/module/overlay/parameters``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, overlay_backends, sh

from tests.timescale import scaled

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="overlay workspaces need root")
_PARAMETERS = Path("/sys/module/overlay/parameters")


def _mount(mountinfo: str, mountpoint: Path) -> tuple[set[str], dict[str, str]]:
    """(per-mount options, super options) of the mount at ``mountpoint`` in a mountinfo."""
    [line] = [line for line in mountinfo.splitlines()
              if line.split(" ")[4] == str(mountpoint)][-1:]
    fields = line.split(" ")
    after = fields[fields.index("-") + 1:]
    assert after[0] == "overlay", line
    supers = dict(option.partition("=")[::2] for option in after[2].split(","))
    return set(fields[5].split(",")), supers


def _effective(supers: dict[str, str], option: str) -> str:
    """An overlay option's value: as shown, else the module's default."""
    if option in supers:
        return supers[option]
    parameter = {"xino": "xino_auto"}.get(option, option)
    default = (_PARAMETERS / parameter).read_text().strip() == "Y"
    return ("auto" if option == "xino" else "on") if default else "off"


def _check(mountinfo: str, mountpoint: Path) -> None:
    flags, supers = _mount(mountinfo, mountpoint)
    assert {"nosuid", "nodev"} <= flags, flags
    assert supers.get("redirect_dir") == "nofollow", supers
    assert supers.get("uuid") == "off", supers
    for option in ("metacopy", "index", "xino"):
        assert _effective(supers, option) == "off", (option, supers)


@ROOT_ONLY
@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_every_mount_option_is_in_effect(open_sb: OpenSandbox) -> None:
    """On the host's mount, and on the child's view of it (same superblock; bubblewrap and
    docker bind it, keeping ``nosuid,nodev``)."""
    sb = open_sb()
    _check(Path("/proc/self/mountinfo").read_text(), sb.root)
    inside = sh(sb, "cat /proc/self/mountinfo")
    assert inside.exit_code == 0, inside.stderr
    _check(inside.stdout.decode(), sb.root)


@ROOT_ONLY
@pytest.mark.parametrize("backend", overlay_backends(only=("host",)), indirect=True)
def test_a_setuid_file_the_child_plants_never_runs_setuid_on_the_host(
        open_sb: OpenSandbox) -> None:
    """The child (the host backend runs it as root) plants a copy of ``id`` owned by uid
    65534 with the setuid bit. Run from the host before any sweep, it must run as the
    caller (root): honoured, the bit would switch it to 65534, as it would switch a
    setuid-root file to root for a normal user."""
    sb = open_sb()
    sh(sb, "cp /usr/bin/id suid-id && chown 65534:65534 suid-id && chmod 4755 suid-id").check()
    planted = sb.root / "suid-id"
    info = planted.stat()
    assert info.st_uid == 65534 and info.st_mode & stat.S_ISUID  # in the upper layer, armed
    ran = subprocess.run([str(planted), "-u"], capture_output=True, text=True, check=True,
                         timeout=scaled(30))
    assert ran.stdout.strip() == str(os.geteuid())
    assert "suid-id" in sb.collect_diff().setid_cleared


@ROOT_ONLY
@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_a_device_node_in_the_merged_view_cannot_be_used(open_sb: OpenSandbox) -> None:
    """A character device 1:3 (``/dev/null``), mode 0666, in the merged view (made from the
    host: no child can ``mknod`` in bubblewrap or docker, the host backend's can) opens
    neither on the host nor for the child."""
    sb = open_sb()
    device = sb.root / "null-device"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    device.chmod(0o666)
    with pytest.raises(PermissionError):
        device.open("rb").close()
    with pytest.raises(PermissionError):
        device.open("wb").close()
    for script in ("head -c 1 null-device", "echo x > null-device"):
        result = sh(sb, script)
        assert result.exit_code != 0, (script, result.stdout, result.stderr)
        assert b"Permission denied" in result.stderr, result.stderr

"""The docker backend's sandbox image: its Dockerfile and builder, shipped in the package.

``build.sh`` (beside its ``Dockerfile``, the build context) makes the image without any
registry: a debootstrap base imported once, then ``docker build --pull=false``. An
installed corral runs it through :func:`build_image` (``corral image build``); a checkout's
``scripts/build_sandbox_image.sh`` runs the same file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox.config import DEFAULT_DOCKER_IMAGE
from sandbox.errors import SandboxConfigError, SandboxError

__all__ = ["IMAGE_DIR", "ImageBuild", "build_image", "check_image_tag"]

#: Where the builder and its Dockerfile are, in a checkout or an installed wheel.
IMAGE_DIR = Path(__file__).resolve().parent
#: A docker image reference: lowercase path components, an optional ``:tag``.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?")


@dataclass(frozen=True)
class ImageBuild:
    """A built image: its reference, the engine's id for it, and the Dockerfile it came from."""

    image: str
    image_id: str
    dockerfile: Path


def check_image_tag(image: str, *, field: str = "tag") -> str:
    """``image`` if it is a docker image reference, else :class:`SandboxConfigError`."""
    if not _REFERENCE.fullmatch(image):
        raise SandboxConfigError(
            f"{image!r} is not a docker image reference", code="bad_image_tag",
            operation="build_image", context={field: image},
            hint="use NAME[:TAG] in lowercase, e.g. corral-sandbox:mine")
    return image


def build_image(image: str = DEFAULT_DOCKER_IMAGE, *, base_image: str | None = None,
                on_output: Callable[[str], None] | None = None) -> ImageBuild:
    """Build the sandbox image ``image`` from the packaged Dockerfile; never pulls.

    ``on_output`` receives the builder's log line by line (it is discarded otherwise,
    but its last lines are in the error when the build fails).
    """
    check_image_tag(image)
    if base_image is not None:
        check_image_tag(base_image, field="base_image")
    bash, docker = shutil.which("bash"), shutil.which("docker")
    if bash is None or docker is None:
        missing = "bash" if bash is None else "docker"
        raise SandboxError(f"building the sandbox image needs {missing} on PATH",
                           code="image_build_unavailable", operation="build_image",
                           hint=f"install {missing} (and start dockerd)")
    env = {**os.environ, "CORRAL_SANDBOX_IMAGE": image}
    if base_image is not None:
        env["CORRAL_BASE_IMAGE"] = base_image
    tail: list[str] = []
    with subprocess.Popen(  # noqa: S603 - the packaged builder, its path fixed, no shell
            [bash, str(IMAGE_DIR / "build.sh")], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
            errors="replace") as proc:
        for line in proc.stdout or ():
            tail = [*tail[-19:], line.rstrip("\n")]
            if on_output is not None:
                on_output(line)
    if proc.returncode != 0:
        raise SandboxError(f"building the sandbox image {image} failed "
                           f"(exit {proc.returncode})", code="image_build_failed",
                           operation="build_image", context={"log": "\n".join(tail)},
                           hint="the log's last lines say why; docker must answer, and a "
                           "missing base image needs debootstrap")
    found = subprocess.run(  # noqa: S603 - fixed docker argv, the tag checked above
        [docker, "image", "inspect", "-f", "{{.Id}}", "--", image], capture_output=True,
        text=True, check=False)
    if found.returncode != 0:
        raise SandboxError(f"the builder finished but {image} is not in the engine",
                           code="image_build_failed", operation="build_image",
                           context={"docker": found.stderr.strip()})
    return ImageBuild(image=image, image_id=found.stdout.strip(),
                      dockerfile=IMAGE_DIR / "Dockerfile")

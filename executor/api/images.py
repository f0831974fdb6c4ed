"""The docker backend's sandbox image, built from the Dockerfile shipped in the package
(:mod:`sandbox.image`): ``corral image build`` and the Python API call this."""

from __future__ import annotations

from collections.abc import Callable

from sandbox.config import DEFAULT_DOCKER_IMAGE
from sandbox.image import ImageBuild, build_image

__all__ = ["ImageBuild", "build_sandbox_image", "image_json"]


def build_sandbox_image(image: str = DEFAULT_DOCKER_IMAGE, *, base_image: str | None = None,
                        on_output: Callable[[str], None] | None = None) -> ImageBuild:
    """Build the sandbox image ``image`` (never pulled: a debootstrap base is made and
    imported when ``base_image`` is absent). A bad tag is a ``bad_image_tag`` error before
    anything runs; a failed build is ``image_build_failed`` with the log's last lines."""
    return build_image(image, base_image=base_image, on_output=on_output)


def image_json(built: ImageBuild) -> dict[str, str]:
    """The JSON ``corral image build --json`` prints."""
    return {"image": built.image, "image_id": built.image_id,
            "dockerfile": str(built.dockerfile)}

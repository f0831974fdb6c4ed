"""``corral image build``: the docker backend's sandbox image, from the packaged Dockerfile."""

from __future__ import annotations

import json

import click

from executor.api.images import build_sandbox_image, image_json
from executor.options import echo
from executor.text import one_line
from sandbox.config import DEFAULT_DOCKER_IMAGE

__all__ = ["image_group"]


@click.group("image")
def image_group() -> None:
    """The docker backend's sandbox image."""


@image_group.command("build")
@click.option("--tag", "image", default=DEFAULT_DOCKER_IMAGE, show_default=True,
              metavar="NAME[:TAG]", help="The image to build (runs use corral-sandbox:latest, or "
              "`image = ...` under `[environment]` of your config).")
@click.option("--base-image", metavar="NAME[:TAG]",
              help="The image to build FROM (default corral-base:bookworm, made with "
              "debootstrap when absent; any other must already be present).")
@click.option("--json", "as_json", is_flag=True, help="Print the built image as JSON.")
def image_build(image: str, base_image: str | None, as_json: bool) -> None:
    """Build the sandbox image with the Dockerfile shipped in corral; nothing is pulled.
    The builder's log streams on stderr."""

    def show(line: str) -> None:
        echo(one_line(line.rstrip("\n")), err=True)

    built = build_sandbox_image(image, base_image=base_image, on_output=show)
    if as_json:
        click.echo(json.dumps(image_json(built), indent=2))
        return
    echo(f"built {one_line(built.image)} ({built.image_id[:19]})")

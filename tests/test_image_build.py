"""``corral image build``'s builder (:mod:`sandbox.image`): a tag is checked before anything
runs, a failed build says why with the builder's own last lines, and nothing is pulled."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.errors import SandboxConfigError, SandboxError
from sandbox.image import IMAGE_DIR, build_image, check_image_tag

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tag", ["corral-sandbox:latest", "corral-sandbox", "a/b/c:1.0-x",
                                 "localhost:5000/corral:dev", "x__y:Tag_1"])
def test_docker_references_are_accepted(tag: str) -> None:
    assert check_image_tag(tag) == tag


@pytest.mark.parametrize("tag", ["", "Upper:tag", "a b", "-q", "--help", "a:b:c",
                                 "x;rm -rf /", "a/:t", "name:" + "t" * 200, "a\nb"])
def test_a_bad_tag_is_refused_before_any_program_runs(tag: str,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """With nothing on PATH the builder could not even start: the tag's error comes first
    (a valid tag reaches the PATH check, below)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxConfigError) as raised:
        build_image(tag)
    assert raised.value.code == "bad_image_tag" and raised.value.exit_code == 2
    assert raised.value.context == {"tag": tag}
    with pytest.raises(SandboxConfigError) as base:
        build_image("corral-sandbox:ok", base_image=tag)
    assert base.value.context == {"base_image": tag}


def test_a_missing_program_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError) as raised:
        build_image("corral-sandbox:ok")
    assert raised.value.code == "image_build_unavailable"
    assert "bash" in raised.value.message


@pytest.mark.requires("docker")
def test_an_absent_base_is_never_pulled_and_the_failure_says_why() -> None:
    """A base image that is not here and not corral's own: the builder stops (it never
    pulls), and the error carries its last lines."""
    lines: list[str] = []
    with pytest.raises(SandboxError) as raised:
        build_image("corral-sandbox:never-built-s43", base_image="nosuch-base-s43:none",
                    on_output=lines.append)
    assert raised.value.code == "image_build_failed"
    assert "never pulls" in raised.value.context["log"]
    assert any("never pulls" in line for line in lines)


def test_the_checkout_script_runs_the_packaged_builder() -> None:
    """One Dockerfile and one builder: the checkout's script execs the packaged one."""
    script = (REPO / "scripts/build_sandbox_image.sh").read_text()
    assert "sandbox/image/build.sh" in script and "docker build" not in script
    assert IMAGE_DIR == REPO / "sandbox/image"
    top = REPO / "Dockerfile"  # at the top level, as the design card fixes it: a link
    assert top.is_symlink() and top.resolve() == (IMAGE_DIR / "Dockerfile").resolve()
    assert '"$image_dir/Dockerfile"' in (IMAGE_DIR / "build.sh").read_text()

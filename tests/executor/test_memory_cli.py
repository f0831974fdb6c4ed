"""Memory through the CLI (issue 29, item 1): ``--memory`` and ``[sandbox] memory`` cap each
sandbox as a whole; the default lets a process reserve more than the old 2 GiB RLIMIT_AS;
an OOM is recorded as ``oom_killed`` (the run's, a check's), never as a failed test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exec_support import agent_file, call, git, script

from executor.api import Corral, CorralError
from executor.cli import cli, main

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

#: Reserve 8 GiB of address space without touching it (what V8 does per wasm memory).
RESERVE = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.mmap.restype = ctypes.c_void_p\n"
    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,"
    " ctypes.c_int, ctypes.c_long]\n"
    "address = libc.mmap(None, 8 << 30, 0, 0x02 | 0x20 | 0x4000, -1, 0)\n"
    "assert address not in (None, ctypes.c_void_p(-1).value), 'mmap failed'\n"
    "print('reserved 8 GiB')\n")
#: Touch 256 MiB, page by page.
TOUCH = ("import mmap\nsize = 256 << 20\nm = mmap.mmap(-1, size)\n"
         "for offset in range(0, size, 4096):\n    m[offset] = 1\nprint('touched')\n")


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "reserve.py").write_text(RESERVE)
    (repo / "touch.py").write_text(TOUCH)
    agent_file(repo, "w", "tools: [write_file, shell, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _config(text: str) -> None:
    path = Path(os.environ["CORRAL_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fanout(repo: Path, backend: str, check: str, *extra: str) -> tuple[int, dict[str, Any]]:
    done = script(repo.parent, "noop", {"text": "nothing to change"})
    code, out, err = corral("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                            "--backend", backend, "--json", "--agent", "w", "--check-cmd",
                            check, "--check-timeout", "60", "-n", "1", "--script", done,
                            *extra, "Do nothing")
    assert out, err
    return code, json.loads(out)


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_check_reserves_more_than_two_gib_under_the_default(project: Path,
                                                              backend: str) -> None:
    code, result = fanout(project, backend, "python3 reserve.py")
    [row] = result["runs"]
    assert code == 0, row["check"]
    assert row["check"]["exit_code"] == 0 and "reserved 8 GiB" in row["check"]["output_tail"]
    assert row["check"]["oom_killed"] is False and row["oom_killed"] is False


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_check_past_the_config_cap_is_oom_killed_not_failed(project: Path,
                                                              backend: str) -> None:
    """``[sandbox] memory`` caps the check's sandbox; touching past it is an OOM, recorded as
    such: an ``error`` naming the cap and how to raise it, never a failed test."""
    _config('[sandbox]\nmemory = "64M"\n')
    code, result = fanout(project, backend, "python3 touch.py")
    [row] = result["runs"]
    check = row["check"]
    assert check["oom_killed"] is True, check
    assert check["error"]["code"] == "oom_killed"
    assert "64M" in check["error"]["message"] and "--memory" in check["error"]["message"]
    assert "touched" not in check["output_tail"]
    assert code == 3  # a check that could not run as asked, not findings (1)
    show = corral("show", "--root", str(project), row["run_id"], "--json")
    assert json.loads(show[1])["check"]["oom_killed"] is True
    table = corral("show", "--root", str(project), result["fanout_id"])
    assert "out of memory" in table[1], table


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_child_past_the_memory_option_is_oom_killed_and_recorded(project: Path,
                                                                   tmp_path: Path,
                                                                   backend: str) -> None:
    """``--memory 64M``: the child's command is killed by the kernel inside the sandbox, the
    agent is told so, the run goes on and completes; its record says ``oom_killed``."""
    turns = script(tmp_path, "hog", call("shell", command="python3 touch.py"),
                   call("shell", command="echo still here"), {"text": "done"})
    code, _, err = corral("run", "--root", str(project), "--trust-project", "--no-personal",
                          "--backend", backend, "--agent", "w", "--script", turns,
                          "--memory", "64M", "Use memory")
    assert code == 0, err
    assert "completed" in err and "a command ran out of memory" in err
    record = json.loads(corral("show", "--root", str(project), "last", "--json")[1])
    assert record["status"] == "completed" and record["oom_killed"] is True
    api = Corral(project).show(record["run_id"])
    assert api.oom_killed is True and api.to_json()["oom_killed"] is True
    text = corral("show", "--root", str(project), record["run_id"])[1]
    assert "exit code 137 (out of memory: the sandbox's cap of 64M" in text
    assert "still here" in text  # the run went on after the kill


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_run_within_its_memory_is_not_oom_killed(project: Path, tmp_path: Path,
                                                   backend: str) -> None:
    turns = script(tmp_path, "ok", call("shell", command="python3 touch.py"), {"text": "done"})
    code, out, err = corral("run", "--root", str(project), "--trust-project", "--no-personal",
                            "--backend", backend, "--agent", "w", "--script", turns,
                            "--memory", "1G", "--json", "Use memory")
    assert code == 0, err
    assert json.loads(out)["oom_killed"] is False


def test_a_bad_memory_option_is_a_usage_error(project: Path) -> None:
    code, _, err = corral("run", "--root", str(project), "--memory", "lots", "hello")
    assert code == 2
    assert "--memory" in err and "'lots' is not a memory size" in err and '"4G"' in err
    with pytest.raises(CorralError) as caught:
        Corral(project, memory="12")
    assert caught.value.code == "usage_error" and "16M" in caught.value.message


def test_a_bad_config_memory_names_the_file_and_field(project: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _config('[sandbox]\nmemory = "lots"\n')
    code = 0
    try:
        main(["run", "--root", str(project), "--no-personal", "hello"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "sandbox.memory" in err and "config.toml" in err and "not a memory size" in err


def test_the_memory_reaches_every_sandbox_config(project: Path) -> None:
    """``--memory`` over ``[sandbox] memory`` over the default (half of this machine)."""
    half = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    assert Corral(project, backend="bubblewrap").backend_config().limits.memory_bytes == half
    _config('[sandbox]\nmemory = "4G"\n')
    assert Corral(project, backend="docker").backend_config().limits.memory_bytes == 4 << 30
    auto = Corral(project, memory="512M").backend_config()
    assert auto.limits.memory_bytes == 512 << 20

#!/usr/bin/env python3
"""Mutation audit of corral's defences: remove each defence, its tests must fail.

Every entry of :data:`MUTATIONS` is one plausible bug in one defence (a flag
dropped, a check weakened, a set narrowed): the exact text it changes (an
*anchor* that must occur exactly once in its file), the replacement, the tests
that must catch it, and why it matters. For each mutant the script writes the
change into a scratch copy of the repository (the files git tracks, plus the
untracked ones it does not ignore), runs only the catching tests there
(``pytest -x -q -p no:cacheprovider``, with a ``--junitxml`` report) and
restores the file. A mutant is *caught* only when the report shows one of its
listed tests failed (in the test itself: an error in a fixture's setup or
teardown, a crash in session cleanup or the failure of another test is not a
catch but an error, see :func:`judge`). It *survives* when those tests pass:
then a defence can be deleted without any test noticing, and the run fails.
The tests that caught a mutant then rerun on the restored, clean copy
(``--clean-reruns``, default once): if one fails there too, or only some of the
times, the catch was a flaky test's, not the defence's: the mutant is *flaky*, and
the run fails.

An anchor that is missing or not unique is an error before anything runs (the
list must follow the code: re-anchor, never delete, a mutation whose code moved).
A baseline run of every catching test on the unmutated copy comes first, so a
mutant is never "caught" by a test that fails anyway. Mutants run in parallel,
one scratch copy per worker (default: the number of CPUs, at most 2).

    .venv/bin/python scripts/mutate_defences.py            # the whole audit (CI runs this)
    .venv/bin/python scripts/mutate_defences.py --list     # the mutations, nothing run
    .venv/bin/python scripts/mutate_defences.py --only bwrap-cap-drop,docker-network-none

Exit status: 0 when every mutant is caught, 1 when one survives, is flaky or a run errs
(a test id that does not exist, a timeout, a broken baseline), 2 when an anchor
is stale or the list itself is invalid. The tests see the environment as given
(``CORRAL_REQUIRE_BACKENDS``, ``CORRAL_REQUIRE``, ``DOCKER_HOST``): run it where
the whole suite runs.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Edit:
    """Replace ``anchor`` (exactly one occurrence) in ``file`` by ``replacement``."""

    file: str
    anchor: str
    replacement: str


@dataclass(frozen=True)
class Mutation:
    """One plausible bug in one defence, and the tests that must notice it."""

    name: str
    area: str
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]
    why: str


def mutation(name: str, area: str, file: str, anchor: str, replacement: str,
             tests: Sequence[str], why: str) -> Mutation:
    """A mutation of one place."""
    return Mutation(name, area, (Edit(file, anchor, replacement),), tuple(tests), why)


# Test ids, shortened below.
CAPS = "tests/sandbox/test_escape_caps.py"
NET = "tests/sandbox/test_escape_network.py"
PROC = "tests/sandbox/test_escape_process.py"
MEM = "tests/sandbox/test_memory_cgroup.py"
MCP = "tests/executor/test_mcp_tools.py"
MCP_POLICY = "tests/executor/test_mcp_tools_policy.py"
MCP_CONF = "tests/sandbox/test_mcp_confine.py"
FETCH = "tests/executor/test_web_fetch.py"
GRANTS = "tests/executor/test_network_grants.py"
EGRESS = "tests/sandbox/test_egress_attacks.py"
EGRESS_PROXY = "tests/sandbox/test_egress_proxy.py"
EGRESS_RUN = "tests/executor/test_egress_run.py"
D = "tests/executor/test_exec_denials.py::"
CONFIG = "tests/sandbox/test_config_read_only.py::"
FS = "tests/sandbox/test_escape_fs.py"
GIT = "tests/sandbox/test_escape_git.py"
LEFT = "tests/sandbox/test_escape_leftovers.py"
CONF = "tests/sandbox/test_conformance.py"
FILES = "tests/sandbox/test_files.py"
NAMES = "tests/test_tools_and_permissions.py"
WEB = "tests/web"
DISPATCH = "tests/executor/test_dispatch.py"
CAPABILITY = "tests/test_capability.py"
APPLY = "tests/executor/test_apply.py"
ATTACKS = "tests/executor/test_apply_attacks.py"
FAULTS = "tests/executor/test_apply_faults.py"
SHELL = "tests/test_shell_patterns.py"
UNTOUCHED = "tests/sandbox/test_parent_git_untouched.py"
CHANGES = "tests/sandbox/test_workspace_changes.py"
ROOTPATHS = "tests/sandbox/test_docker_root_paths.py"
TERMINAL = "tests/executor/test_terminal_escaping.py"
SPEC = "tests/spec/test_discovery_spec.py"
OVERLAY = "tests/sandbox/test_overlay_attacks.py"
OVERLAY_CONF = "tests/sandbox/test_overlay_conformance.py"
WARM = "tests/sandbox/test_warm_sandbox.py"
SURVIVE = "tests/sandbox/test_survival_tricks.py"
REPLAY = "tests/sandbox/test_replay.py"
CHECKS = "tests/executor/test_check_on_record.py"
TRUTH = "tests/executor/test_workspace_write_truth.py"
CRASH = "tests/sandbox/test_overlay_crash.py"
SWEEP = "tests/sandbox/test_setid_sweep.py"
CATALOG_RUN = "tests/spec/test_catalog_runtime.py"
ENV = "tests/executor/test_environment.py"
ENV_SPEC = "tests/test_environment_spec.py"
CARRIED = "tests/executor/test_carried_interpreters.py"
REMOTE = "tests/executor/test_remote_records.py"
HOSTILE = f"{REMOTE}::test_a_hostile_pack_is_refused_and_nothing_is_written"
RAY = "tests/executor/test_fanout_ray.py"
REUSE = "tests/sandbox/test_snapshot_reuse.py"
POISON = "tests/sandbox/test_snapshot_poisoning.py"
CANCEL = "tests/sandbox/test_cancel.py"
INTERRUPTED = f"{CANCEL}::test_a_command_whose_wait_is_interrupted_dies_and_the_sandbox_goes_on"
LIFECYCLE = "tests/executor/test_cli_run_lifecycle.py"
NODE_PLACE = "tests/executor/test_node_place.py"
SIBLINGS = "tests/executor/test_remote_siblings.py"
BRANCH_NAMES = "tests/executor/test_apply_branch_names.py"
HANDWORK = "tests/executor/test_continue_and_shell.py"
TRUST = "tests/executor/test_trust.py"
GLOBS = "tests/test_glob_dialect.py"
SECCOMP = "tests/sandbox/test_bwrap_seccomp.py"
CACHE = "tests/models/test_prompt_cache.py"

MUTATIONS: tuple[Mutation, ...] = (
    # -- bubblewrap options ---------------------------------------------------------------
    mutation(
        "bwrap-cap-drop", "bubblewrap", "sandbox/backends/bwrap.py",
        '"--disable-userns", "--cap-drop", "ALL",', '"--disable-userns",',
        [f"{CAPS}::test_commands_hold_no_capabilities[bubblewrap-worktree]",
         f"{CAPS}::test_unreadable_file_stays_unreadable[bubblewrap-worktree]"],
        "bwrap run as root leaves the child every capability (CapEff 000001fffeffffff)"),
    mutation(
        "bwrap-unshare-net", "bubblewrap", "sandbox/backends/bwrap.py",
        '"--unshare-all", "--unshare-user",',
        '"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", '
        '"--unshare-cgroup-try",',
        [f"{NET}::test_child_cannot_reach_the_host[bubblewrap-worktree]"],
        "the namespaces listed one by one, the network one forgotten: the host is reachable"),
    Mutation(
        "bwrap-die-with-parent", "bubblewrap",
        (Edit("sandbox/backends/bwrap.py", '"--die-with-parent", "--new-session",',
              '"--new-session",'),
         Edit("sandbox/backends/warm_init.py",
              "        if not chunk:\n            raise _HostGone\n",
              "        if not chunk:\n            signal.pause()\n")),
        (f"{PROC}::test_sandbox_dies_with_corral[bubblewrap]",),
        "a command outlives a corral that was killed; bwrap's --die-with-parent and the warm "
        "supervisor's exit when its control pipe closes each suffice alone, so both go"),
    mutation(
        "bwrap-disable-userns", "bubblewrap", "sandbox/backends/bwrap.py",
        '"--unshare-user", "--disable-userns",', '"--unshare-user",',
        # The seccomp filter refuses a user namespace first (EPERM): this layer shows only
        # in a sandbox without the filter.
        [f"{SECCOMP}::test_disable_userns_holds_without_the_filter"],
        "the child creates a user namespace and holds every capability inside it"),
    Mutation(
        "bwrap-clearenv", "bubblewrap",
        (Edit("sandbox/backends/bwrap.py", '"--new-session", "--clearenv",', '"--new-session",'),
         Edit("sandbox/backends/bwrap.py",
              'env={"PATH": os.defpath}, cwd=Path("/"), start_new_session=True,',
              'env=dict(os.environ), cwd=Path("/"), start_new_session=True,')),
        (f"{PROC}::test_child_env_is_allowlist_only[bubblewrap]",
         f"{WARM}::test_supervisor_holds_no_host_environment[bubblewrap]"),
        "the parent's environment (tokens, SSH_AUTH_SOCK) reaches the child; --clearenv and "
        "the runner's fixed environment each suffice alone, so both go"),
    mutation(
        "bwrap-usr-writable", "bubblewrap", "sandbox/backends/bwrap.py",
        '"--ro-bind", "/usr", "/usr"]', '"--bind", "/usr", "/usr"]',
        [f"{CAPS}::test_system_is_read_only[bubblewrap-workspace-write]"],
        "a root child writes the host's /usr"),
    mutation(
        "bwrap-workspace-ro-bind", "bubblewrap", "sandbox/backends/bwrap.py",
        'args += ["--bind" if mount.writable else "--ro-bind", str(mount.origin),',
        'args += ["--bind", str(mount.origin),',
        [f"{CONF}::test_read_only_stays_read_only[bubblewrap]"],
        "read-only mode and the git dirs become writable"),
    mutation(
        "bwrap-remount-ro", "bubblewrap", "sandbox/backends/bwrap.py",
        'args += ["--chdir", cwd, "--remount-ro", "/", "--as-pid-1", "--", *command]',
        'args += ["--chdir", cwd, "--as-pid-1", "--", *command]',
        [f"{CAPS}::test_system_is_read_only[bubblewrap-worktree]"],
        "the sandbox's root (its /etc among it) becomes writable"),
    mutation(
        "bwrap-new-session", "bubblewrap", "sandbox/backends/bwrap.py",
        '"--die-with-parent", "--new-session",', '"--die-with-parent",',
        [f"{PROC}::test_command_session_leader_is_inside_the_sandbox[bubblewrap]",
         f"{WARM}::test_supervisor_session_is_inside_the_sandbox[bubblewrap]"],
        "the command shares a session with a process outside the sandbox (TIOCSTI, CVE-2017-5226)"),
    mutation(
        "bwrap-pids-cgroup", "bubblewrap", "sandbox/backends/bwrap.py",
        "prefix = self._cgroup.join_argv()", "prefix = []",
        [f"{PROC}::test_process_limit_stops_forks[bubblewrap]"],
        "the pids cgroup is made but never joined: no process limit (fork bomb)"),
    mutation(
        "bwrap-memory-cgroup-joined", "bubblewrap", "sandbox/backends/bwrap.py",
        "prefix += self._memory.join_argv()", "pass",
        [f"{MEM}::test_past_the_cap_is_oom_killed_and_the_sandbox_lives[bubblewrap]",
         f"{PROC}::test_memory_limit_kills_child_not_parent[bubblewrap]"],
        "the memory cgroup is made but never joined: the sandbox takes the host's memory"),
    mutation(
        "bwrap-memory-cgroup-limit", "bubblewrap", "sandbox/backends/limits.py",
        '(path / "memory.limit_in_bytes").write_text(str(limit))', "pass",
        [f"{MEM}::test_past_the_cap_is_oom_killed_and_the_sandbox_lives[bubblewrap]",
         f"{MEM}::test_bubblewrap_caps_the_sandbox_with_a_cgroup[bubblewrap]"],
        "the memory cgroup (cgroup v1) is joined but never capped: no memory limit"),
    mutation(
        "bwrap-memory-cgroup-swap", "bubblewrap", "sandbox/backends/limits.py",
        '(path / "memory.memsw.limit_in_bytes").write_text(str(limit))', "pass",
        [f"{MEM}::test_bubblewrap_caps_the_sandbox_with_a_cgroup[bubblewrap]"],
        "memory past the cap goes to swap (cgroup v1): the machine thrashes instead of the "
        "child being stopped"),
    mutation(
        "bwrap-no-address-space-cap", "bubblewrap", "sandbox/backends/bwrap.py",
        "        self._oom_kills = self._memory.oom_kills()\n        return None\n",
        "        self._oom_kills = self._memory.oom_kills()\n        return memory\n",
        [f"{MEM}::test_default_lets_a_process_reserve_address_space[bubblewrap]",
         f"{MEM}::test_a_child_can_make_a_wasm_memory[bubblewrap]"],
        "RLIMIT_AS set beside the memory cgroup: address-space reservations (V8 WebAssembly) "
        "fail again"),
    mutation(
        "bwrap-oom-reported", "bubblewrap", "sandbox/backends/bwrap.py",
        "            if kills > self._oom_kills:", "            if False:",
        [f"{MEM}::test_past_the_cap_is_oom_killed_and_the_sandbox_lives[bubblewrap]"],
        "an OOM kill is reported as the command's own failure (a failed test)"),
    mutation(
        "docker-oom-reported", "docker", "sandbox/backends/docker.py",
        "grew, self._oom_kills = kills > self._oom_kills, kills",
        "grew, self._oom_kills = False, kills",
        [f"{MEM}::test_past_the_cap_is_oom_killed_and_the_sandbox_lives[docker]"],
        "an OOM kill in the container is reported as the command's own failure"),
    mutation(
        "gc-memory-cgroups", "bubblewrap", "sandbox/gc.py",
        'map(find_hierarchy, ("pids", "memory"))', 'map(find_hierarchy, ("pids",))',
        [f"{CONF}::test_gc_removes_orphaned_containers_and_cgroups[bubblewrap]"],
        "a crashed sandbox's memory cgroup (cgroup v1) is never removed by gc"),
    mutation(
        "bwrap-seccomp", "bubblewrap", "sandbox/backends/bwrap.py",
        'args[1:1] = ["--seccomp", str(seccomp_fd)]', "pass",
        [f"{SECCOMP}::test_the_filter_is_installed",
         f"{SECCOMP}::test_each_rule_refuses_its_attack[ptrace]"],
        "the filter is compiled and its memfd passed, but bwrap is never told: every command "
        "has ptrace, io_uring, bpf, the keyring and the mount calls"),
    mutation(
        "seccomp-io-uring", "bubblewrap", "sandbox/backends/seccomp.py",
        '    *_whole(("io_uring_setup", "io_uring_enter", "io_uring_register")),\n', "",
        [f"{SECCOMP}::test_each_rule_refuses_its_attack[io_uring_setup]"],
        "one rule dropped from the filter: io_uring, a system call interface no filter sees "
        "into, is open again"),
    mutation(
        "seccomp-ioctl-64-bit", "bubblewrap", "sandbox/backends/seccomp.py",
        'Rule("ioctl", (_low32(1, _TIOCSTI),)),', 'Rule("ioctl", (Arg(1, _CMP_EQ, _TIOCSTI),)),',
        [f"{SECCOMP}::test_tiocsti_is_refused_on_the_low_32_bits"],
        "TIOCSTI compared on all 64 bits: the request with a high bit set pushes keystrokes "
        "(the kernel reads 32; flatpak's CVE-2019-10063)"),
    mutation(
        "seccomp-bad-arch", "bubblewrap", "sandbox/backends/seccomp.py",
        "_ATTR_ACT_BADARCH, _ACT_KILL_PROCESS)", "_ATTR_ACT_BADARCH, _ACT_ALLOW)",
        [f"{SECCOMP}::test_a_32_bit_system_call_kills_the_process"],
        "a 32-bit system call (int 0x80, x32) is allowed: another table, where no rule holds"),
    mutation(
        "runner-new-session", "processes", "sandbox/backends/process.py",
        "env=dict(env), cwd=cwd, start_new_session=True,", "env=dict(env), cwd=cwd,",
        [f"{PROC}::test_tiocsti_ioctl_fails_in_child[host]"],
        "host commands keep corral's controlling terminal and push keystrokes into it"),
    # -- docker options -------------------------------------------------------------------
    mutation(
        "docker-cap-drop", "docker", "sandbox/backends/docker.py",
        '"cap_drop": ["ALL"], ', "",
        [f"{CAPS}::test_commands_hold_no_capabilities[docker-worktree]"],
        "docker's default capabilities stay in the bounding set (CapBnd 00000000a80425fb)"),
    mutation(
        "docker-network-none", "docker", "sandbox/backends/docker.py",
        "        if not self.config.network or self._slirp is not None:\n"
        "            return \"none\"\n",
        "        if False:\n            return \"none\"\n",
        [f"{NET}::test_container_is_on_network_none[docker-worktree]",
         f"{NET}::test_child_cannot_reach_the_host[docker-worktree]"],
        "the container joins the engine's default bridge and reaches the host"),
    mutation(
        "docker-no-new-privileges", "docker", "sandbox/backends/docker.py",
        '"security_opt": ["no-new-privileges"],', '"security_opt": [],',
        [f"{CAPS}::test_commands_hold_no_capabilities[docker-worktree]"],
        "a setuid binary in the image or the workspace raises the child's privileges"),
    mutation(
        "docker-seccomp", "docker", "sandbox/backends/docker.py",
        '"security_opt": ["no-new-privileges"],',
        '"security_opt": ["no-new-privileges", "seccomp=unconfined"],',
        [f"{CAPS}::test_no_nested_user_namespace[docker]",
         f"{CAPS}::test_commands_hold_no_capabilities[docker-worktree]"],
        "without the engine's seccomp filter the child makes user namespaces (and every "
        "other syscall docker refuses)"),
    mutation(
        "docker-read-only-root", "docker", "sandbox/backends/docker.py",
        '"read_only": True,', '"read_only": False,',
        [f"{CAPS}::test_system_is_read_only[docker-workspace-write]"],
        "the container's root filesystem is writable (a uid-0 child rewrites /usr)"),
    mutation(
        "docker-user", "docker", "sandbox/backends/docker.py",
        "user = (_DEFAULT_UID, _DEFAULT_UID) if root else (os.getuid(), os.getgid())",
        "user = (0, 0) if root else (os.getuid(), os.getgid())",
        ["tests/sandbox/test_backends_api.py::test_docker_users"],
        "worktree children run as root inside the container"),
    mutation(
        "docker-pids-limit", "docker", "sandbox/backends/docker.py",
        'options["pids_limit"] = limits.pids + 2', 'options["pids_limit"] = -1',
        [f"{PROC}::test_process_limit_stops_forks[docker]"],
        "no process limit in the container (fork bomb)"),
    mutation(
        "docker-memory-limit", "docker", "sandbox/backends/docker.py",
        'options["mem_limit"] = options["memswap_limit"] = limits.memory_bytes',
        "pass  # the limit is forgotten",
        [f"{PROC}::test_memory_limit_kills_child_not_parent[docker]"],
        "no memory cap: the child takes the host's memory"),
    # -- confinement of the file tools ----------------------------------------------------
    mutation(
        "confine-dotdot", "confinement", "sandbox/files/resolver.py",
        '        if ".." in parts:\n', '        if ".." in parts[:1]:\n',
        [f"{FILES}::test_escapes_are_refused", f"{FS}::test_tool_path_rejects_parent_traversal"],
        "'src/../../secret' leaves the workspace"),
    mutation(
        "confine-absolute-symlink", "confinement", "sandbox/files/resolver.py",
        "if target.startswith(\"/\") or hops > _MAX_SYMLINKS:", "if hops > _MAX_SYMLINKS:",
        [f"{FILES}::test_escapes_are_refused"],
        "a symlink to /etc is followed"),
    mutation(
        "confine-symlink-clamp", "confinement", "sandbox/files/resolver.py",
        'if len(fds) == 1:\n                        raise PathDenied(f"{path}: a symlink leads',
        'if len(fds) == 1:\n                        continue\n'
        '                        raise PathDenied(f"{path}: a symlink leads',
        [f"{FILES}::test_escapes_are_refused"],
        "a link's '..' past the root is clamped (RESOLVE_IN_ROOT) instead of refused"),
    mutation(
        "confine-git-alias", "confinement", "sandbox/files/resolver.py",
        "                if is_git_alias(name):\n", "                if name == \".git\":\n",
        [f"{FILES}::test_git_dir_is_not_readable_through_file_tools"],
        ".GIT, git~1 and friends reach the git directory"),
    mutation(
        "names-ntfs-folding", "confinement", "sandbox/names.py",
        'folded = folded.split(":", 1)[0].rstrip(" .")', "folded = folded",
        [f"{FILES}::test_every_spelling_of_dot_git_is_an_alias"],
        "'.git.' and '.git::$INDEX_ALLOCATION' are not seen as .git"),
    mutation(
        "names-hfs-ignorable", "confinement", "sandbox/names.py",
        'folded = "".join(ch for ch in name if ord(ch) not in _HFS_IGNORABLE).casefold()',
        "folded = name.casefold()",
        [f"{FILES}::test_every_spelling_of_dot_git_is_an_alias"],
        "'.g\\u200cit' (HFS+ ignores the joiner) is not seen as .git"),
    mutation(
        "files-keep-setuid", "confinement", "sandbox/files/confined.py",
        "perms = stat.S_IMODE(existing.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)",
        "perms = stat.S_IMODE(existing.st_mode)",
        [f"{FILES}::test_writes_never_keep_setuid_or_setgid"],
        "an edit through the file tools re-arms a planted setuid binary"),
    mutation(
        "files-symlink-escape", "confinement", "sandbox/files/confined.py",
        'target.startswith("/") or level < 0:', 'target.startswith("/"):',
        [f"{FILES}::test_write_operations"],
        "the file API creates a symlink '../../x' pointing out of the workspace"),
    mutation(
        "files-read-only", "confinement", "sandbox/files/confined.py",
        "        if not self.writable:\n            raise PathDenied(",
        "        if not self.writable and self.root is None:\n            raise PathDenied(",
        [f"{FILES}::test_read_only_refuses_every_write"],
        "a read-only workspace accepts writes through the file API"),
    # -- exact tool names -----------------------------------------------------------------
    mutation(
        "toolname-nfkc", "tool names", "policies/tools.py",
        '    if unicodedata.normalize("NFKC", name) != name:\n        raise',
        '    if unicodedata.normalize("NFKC", name) != name:\n'
        '        name = unicodedata.normalize("NFKC", name)\n    if False:\n        raise',
        [f"{NAMES}::test_disguised_native_names_are_refused"],
        "fullwidth and compatibility spellings are folded into a real tool name"),
    mutation(
        "toolname-case", "tool names", "policies/tools.py",
        "    if folded is not None:\n        raise ToolNameError(",
        "    if folded is not None:\n        return folded\n        raise ToolNameError(",
        [f"{NAMES}::test_disguised_native_names_are_refused"],
        "'Read_File' is taken as read_file (a fuzzy match grants a misspelled deny's tool)"),
    mutation(
        "dispatch-exact-name", "tool names", "executor/tools/dispatch.py",
        "        name = self.canonical(call.name)\n",
        "        name = self.canonical(call.name.strip().lower())\n",
        [f"{DISPATCH}::test_variants_of_a_real_name_are_denied_and_nothing_runs"],
        "the dispatcher normalizes names: 'SHELL' and 'shell\\n' run the shell"),
    mutation(
        "dispatch-hidden-tools", "tool names", "executor/tools/dispatch.py",
        "self.tools = {name: tool for name, tool in tools.items() if name in visible}",
        "self.tools = dict(tools)",
        [f"{DISPATCH}::test_a_hidden_tool_is_refused_by_every_layer_on_its_own"],
        "tools the child does not hold are offered and reach the permission layer"),
    mutation(
        "dispatch-deferred", "tool names", "executor/tools/dispatch.py",
        "tool = self.tools.get(name) if name is not None and name not in self.deferred else None",
        "tool = self.tools.get(name) if name is not None else None",
        [f"{DISPATCH}::test_deferred_tools_are_uncallable_until_activated"],
        "a deferred tool is callable before tool_search activated it"),
    mutation(
        "text-call-widens-contract", "tool names", "executor/run/session.py",
        "        offered = {schema.name for schema in self.dispatcher.schemas()}\n"
        "        foreign = ",
        "        offered = set(NATIVE_TOOLS)\n        foreign = ",
        ["tests/models/test_text_tool_calls.py::test_a_text_call_to_a_tool_not_given_is_denied_"
         "and_fails_the_run"],
        "a tool call the model wrote as text is judged against the catalog, not the agent's "
        "tools: a text call to a tool it was not given no longer fails the run"),
    mutation(
        "text-call-in-prose", "tool names", "executor/models/textcalls.py",
        "    if not whole:\n        return TextCalls(\"ambiguous\"",
        "    if False:\n        return TextCalls(\"ambiguous\"",
        ["tests/models/test_text_tool_calls.py::test_call_like_text_among_other_text_is_"
         "ambiguous",
         "tests/models/test_text_tool_calls.py::test_call_like_text_in_an_answer_fails_the_run_"
         "showing_it"],
        "a call-shaped JSON object inside a longer answer runs: a file the model quotes "
        "(prompt injection) becomes a call"),
    mutation(
        "model-limits-answer-room", "model limits", "executor/run/opening.py",
        "                          max_tokens=limits.output_tokens()),\n",
        "                          ),\n",
        ["tests/models/test_model_limits.py::test_a_run_asks_for_what_the_providers_window_"
         "leaves"],
        "a provider's context_window and max_tokens never reach the request: a 2048-token "
        "local model is asked for 4096 answer tokens"),
    mutation(
        "model-limits-budget", "model limits", "executor/run/opening.py",
        "        budget_tokens=limits.input_budget(),\n", "",
        ["tests/models/test_model_limits.py::test_a_run_asks_for_what_the_providers_window_"
         "leaves"],
        "the conversation's budget ignores the provider's context window (auto-compaction "
        "waits for 100k tokens)"),
    # -- narrowing ------------------------------------------------------------------------
    mutation(
        "review-commands-only-the-shell", "narrowing", "policies/capability.py",
        "REVIEW_COMMAND_GROUPS = frozenset({ToolGroup.EXEC})",
        "REVIEW_COMMAND_GROUPS = frozenset({ToolGroup.EXEC, ToolGroup.WRITE})",
        ["tests/test_review_commands_policy.py::test_the_shell_stays_only_with_the_users_grant",
         "tests/executor/test_review_commands.py::test_commands_cannot_write_the_checkout_through_the_layer[bubblewrap]"],
        "the review-commands grant gives a read-only agent write_file and edit too"),
    mutation(
        "review-commands-only-granted", "narrowing", "policies/capability.py",
        "not _removed_read_only(t, parent.review_commands) or (",
        "not _removed_read_only(t, True) or (",
        ["tests/test_review_commands_policy.py::test_the_shell_stays_only_with_the_users_grant",
         "tests/executor/test_review_commands.py::test_without_the_grant_the_shell_is_removed_and_the_record_says_how"
         "[planner-bubblewrap]"],
        "a read-only agent keeps its shell without the user's grant"),
    mutation(
        "narrow-allowlist", "narrowing", "policies/capability.py",
        "        tools = _select(contract.tools, tools)\n",
        "        tools = _select(contract.tools, tools | set(NATIVE_TOOLS))\n",
        [f"{CAPABILITY}::test_allowlist_naming_a_tool_the_parent_never_had_grants_nothing"],
        "an allowlist naming a tool the parent never had grants it"),
    mutation(
        "narrow-deny-patterns", "narrowing", "policies/capability.py",
        "tools -= _select(contract.denied_tools, tools)", "tools -= set(contract.denied_tools)",
        [f"{CAPABILITY}::test_mcp_prefix_patterns_select_installed_tools_only"],
        "a deny pattern (mcp__github__*) removes nothing"),
    mutation(
        "narrow-sandbox", "narrowing", "policies/capability.py",
        "sandbox = SandboxMode.strictest(parent.sandbox, contract.sandbox) or parent.sandbox",
        "sandbox = contract.sandbox or parent.sandbox",
        [f"{CAPABILITY}::test_child_is_never_wider_than_parent",
         f"{CAPABILITY}::test_a_child_cannot_pick_a_wider_sandbox_than_its_parents"],
        "a child's definition picks a wider sandbox mode than its parent's"),
    mutation(
        "narrow-reviewer-custom-tools", "narrowing", "policies/capability.py",
        "READ_ONLY_REMOVED_GROUPS = frozenset({ToolGroup.WRITE, ToolGroup.EXEC, "
        "ToolGroup.CUSTOM})",
        "READ_ONLY_REMOVED_GROUPS = frozenset({ToolGroup.WRITE, ToolGroup.EXEC})",
        [f"{CAPABILITY}::test_reviewer_loses_write_exec_and_custom_tools"],
        "a reviewer keeps installed custom (MCP) tools, which may write anywhere"),
    mutation(
        "narrow-layers", "narrowing", "policies/capability.py",
        "layers = (*layers, contract.permission)", "layers = (contract.permission,)",
        [f"{CAPABILITY}::test_allow_all_cannot_lift_a_deny"],
        "a child's permission layer replaces its parent's rules instead of adding to them"),
    mutation(
        "narrow-delegates", "narrowing", "policies/capability.py",
        "delegates = contract.delegates if delegates is None else delegates & "
        "contract.delegates",
        "delegates = contract.delegates",
        [f"{CAPABILITY}::test_child_is_never_wider_than_parent",
         f"{CAPABILITY}::test_a_childs_restriction_cannot_add_agents_its_parent_could_not_reach"],
        "a child may delegate to agents its parent could not"),
    mutation(
        "narrow-depth", "narrowing", "policies/capability.py",
        'update={"depth": max(parent.depth - 1, 0)}', 'update={"depth": parent.depth}',
        [f"{CAPABILITY}::test_delegation_allowlist_and_depth"],
        "delegation never runs out of depth"),
    # -- permission layering --------------------------------------------------------------
    mutation(
        "permissions-strictest-wins", "permissions", "policies/permissions.py",
        "        if _SEVERITY[action] > _SEVERITY[result]:\n            result = action",
        "        result = action",
        [f"{NAMES}::test_layers_combine_strictest_first"],
        "the last layer wins, so a child's allow overrides an ancestor's deny"),
    mutation(
        "permissions-allow-all-lifts-deny", "permissions", "policies/permissions.py",
        "if found is Action.ASK and self.mode is PermissionMode.ALLOW_ALL:",
        "if found is not Action.ALLOW and self.mode is PermissionMode.ALLOW_ALL:",
        [f"{NAMES}::test_modes"],
        "allow_all lifts an explicit deny (deny must be terminal in every mode)"),
    mutation(
        "permissions-custom-side-effects", "permissions", "policies/tools.py",
        "return spec is None or spec.side_effect is not SideEffect.NONE",
        "return spec is not None and spec.side_effect is not SideEffect.NONE",
        [f"{NAMES}::test_modes"],
        "strict mode lets unknown custom tools through as if they had no effect"),
    mutation(
        "capability-decide-held", "permissions", "policies/capability.py",
        "        if tool not in self.tools:\n            return Action.DENY\n", "",
        [f"{DISPATCH}::test_a_hidden_tool_is_refused_by_every_layer_on_its_own"],
        "the capability decides by rules alone; a tool it does not hold is allowed"),
    # -- strict YAML ----------------------------------------------------------------------
    mutation(
        "yaml-duplicates", "strict YAML", "policies/loader/yamlstrict.py",
        "            if key in seen:\n", "            if key in seen and key == \"name\":\n",
        [f"{SPEC}::test_duplicate_yaml_keys_rejected"],
        "'tools' written twice silently keeps the last one"),
    Mutation(
        "yaml-anchors-aliases", "strict YAML",
        (Edit("policies/loader/yamlstrict.py",
              "        if isinstance(event, yaml.events.AliasEvent):\n", "        if False:\n"),
         Edit("policies/loader/yamlstrict.py",
              "        if anchor is not None:\n", "        if False:\n")),
        (f"{SPEC}::test_yaml_aliases_rejected",),
        "aliases (billion laughs, one value silently shared) load; an alias needs an anchor, "
        "so either check alone refuses it and both go"),
    mutation(
        "yaml-scalar-anchors", "strict YAML", "policies/loader/yamlstrict.py",
        "        if anchor is not None:\n",
        "        if anchor is not None and not isinstance(event, yaml.events.ScalarEvent):\n",
        [f"{SPEC}::test_yaml_aliases_rejected"],
        "an anchor on a scalar is accepted (only collections were thought to matter)"),
    mutation(
        "yaml-tags", "strict YAML", "policies/loader/yamlstrict.py",
        "        explicit = tag is not None and (",
        "        explicit = tag is not None and tag.startswith(\"!!python\") and (",
        [f"{SPEC}::test_explicit_yaml_tags_rejected"],
        "explicit tags other than !!python (!!binary, local tags) are accepted"),
    mutation(
        "loader-claude-grep-alias", "loader", "policies/aliases.py",
        '"Glob": _FIND, "Grep": _SEARCH, "LS": _LIST,',
        '"Glob": _FIND, "Grep": _SEARCH | _SHELL, "LS": _LIST,',
        ["tests/test_corpus.py::test_corpus_authority_pins"],
        "a Claude agent allowed Grep gets the shell; the hand-kept corpus pins see it even "
        "after --snapshot-update"),
    # -- apply validation (the patch alone: executor/apply/patch.py) ------------------------
    mutation(
        "apply-dotdot", "apply", "executor/apply/patch.py",
        "    elif \"..\" in text.split(\"/\"):\n", "    elif False:\n",
        [f"{APPLY}::test_apply_rejects_parent_traversal",
         f"{APPLY}::test_apply_rejects_rename_target_outside"],
        "a patch writes ../outside"),
    mutation(
        "apply-git-alias", "apply", "executor/apply/patch.py",
        "elif any(is_git_alias(part) for part in text.split(\"/\")):",
        "elif \".git\" in text.split(\"/\"):",
        [f"{APPLY}::test_apply_rejects_dot_git_variants"],
        "a patch writes .GIT/hooks (an alias of .git on case-insensitive filesystems)"),
    mutation(
        "apply-gitlink", "apply", "executor/apply/patch.py",
        'if "160000" in (item.new_mode, item.old_mode):', 'if item.old_mode == "160000":',
        [f"{APPLY}::test_patch_with_gitlink_rejected"],
        "a patch adds a gitlink (submodule)"),
    mutation(
        "apply-symlink", "apply", "executor/apply/patch.py",
        '        if item.new_mode == "120000" and not allow_symlinks:\n'
        '            plan.problems.append(',
        '        if item.new_mode == "120000" and allow_symlinks:\n'
        '            plan.problems.append(',
        [f"{APPLY}::test_patch_symlink_mode_rejected_by_policy"],
        "a patch creates a symlink without --allow-symlinks"),
    mutation(
        "apply-beyond-symlink", "apply", "executor/apply/patch.py",
        "        if parents & links:\n", "        if item.path in links and parents & links:\n",
        [f"{APPLY}::test_apply_beyond_symlink_rejected"],
        "a patch writes through a symlink it creates (lnk -> /tmp, then lnk/x)"),
    mutation(
        "apply-gitdir-pointer", "apply", "executor/apply/patch.py",
        "        if item.gitdir_pointer and not allow_git_dirs:\n", "        if False:\n",
        [f"{ATTACKS}::test_a_gitdir_pointer_and_a_commondir_are_refused"],
        "a file starting with 'gitdir:' (a pointer git follows to a repository) is merged"),
    Mutation(
        "apply-git-dir-signature", "apply",
        (Edit("executor/apply/patch.py",
              "    if not allow_git_dirs:\n        plan.problems += git_dir_problems(plan, None)\n",
              "    if False:\n        plan.problems += git_dir_problems(plan, None)\n"),
         Edit("executor/apply/checkout.py",
              "    unsafe = [] if allow_git_dirs else git_dir_problems(",
              "    unsafe = [] if True else git_dir_problems(")),
        (f"{ATTACKS}::test_an_embedded_git_directory_is_refused_unless_allowed",),
        "a child's HEAD + config + objects/ + refs/ (a repository whose config runs a program "
        "when a tool opens the folder) is merged; the patch and the checkout check both go"),
    # -- apply against the checkout (executor/apply/: checkout.py, merge.py, recorded.py) ----
    mutation(
        "apply-precheck-absent", "apply", "executor/apply/checkout.py",
        "            if checker.parents(target):\n                checker.absent(target)\n",
        "            if checker.parents(target):\n                pass\n",
        [f"{ATTACKS}::test_an_ignored_directory_where_the_child_wrote_a_file_is_a_conflict_"
         "named_before_any_write"],
        "a file the patch creates where an ignored directory holds the user's files is not a "
        "conflict: git apply fails halfway"),
    mutation(
        "apply-restore", "apply", "executor/apply/merge.py",
        "        backup.restore(checkout)  # RestoreFailed", "        pass  # RestoreFailed",
        [f"{FAULTS}::test_a_failure_at_any_step_leaves_the_checkout_byte_identical"],
        "a failure after git apply wrote leaves the checkout half-applied"),
    mutation(
        "apply-digest", "apply", "executor/apply/recorded.py",
        "    elif hashlib.sha256(patch).hexdigest() != record.diff_sha256:\n",
        "    elif False:\n",
        [f"{ATTACKS}::test_a_tampered_diff_is_refused_by_apply_check_and_3way"],
        "an edited diff.patch in the ledger is applied"),
    # -- shell command patterns (policies/shellsyntax.py, policies/shellwords.py) --------
    mutation(
        "shell-comment", "shell patterns", "policies/shellsyntax.py",
        '            if char == "#":\n                while self.i < len(self.s)',
        '            if char == "#" and False:\n                while self.i < len(self.s)',
        [f"{SHELL}::test_attack_comment_quote_does_not_allow_a_hidden_command",
         f"{SHELL}::test_attack_comment_quote_does_not_hide_a_denied_command"],
        "`git diff #'<nl>id<nl>'` under Bash(git diff:*): the comment is read as a quote "
        "and the hidden `id` is allowed"),
    mutation(
        "shell-expansion", "shell patterns", "policies/shellwords.py",
        '        if isinstance(part, Expansion) and part.kind != "ansi":\n',
        '        if False:\n',
        [f"{SHELL}::test_table"],
        "`git diff $(id)` is allowed by `git diff *`: the substitution runs id"),
    mutation(
        "shell-assignment", "shell patterns", "policies/shellwords.py",
        '    if command.assignments:\n        reasons.append(f"{where}: assigns variables")\n',
        '    if False:\n        reasons.append(f"{where}: assigns variables")\n',
        [f"{SHELL}::test_table"],
        "`PATH=/tmp/evil git diff` is allowed: the assignment changes which git runs"),
    mutation(
        "shell-uncertain-name", "shell patterns", "policies/permissions.py",
        "    if reading.uncertain or not reading.exhaustive:",
        "    if not reading.exhaustive:",
        [f"{SHELL}::test_an_uncertain_name_matches_every_deny_and_ask_pattern",
         "tests/executor/test_shell_pattern_attack.py::"
         "test_deny_pattern_sees_an_expanded_command[host]"],
        "with Bash(rm:*) denied, `x=rm; $x f`, `r$()m f` and `sh -c \"$x\"` run rm: a "
        "command name that expands no longer matches every deny pattern"),
    mutation(
        "shell-uncertain-argument", "shell patterns", "policies/permissions.py",
        "if rule.pattern is not None and _may_match(rule.pattern, subject,\n"
        "                                                                       wilds)}",
        "if rule.pattern is not None and glob_matches(rule.pattern, subject)}",
        [f"{SHELL}::test_an_uncertain_word_a_pattern_tests_matches"],
        "`git $x origin` and `git pu$()sh` pass `git push *`: an expanding argument is "
        "matched as its text instead of as any value"),
    # -- the parent's .git, the workspace, the state dir, the terminal ---------------------
    mutation(
        "parent-git-freshened", "git hardening", "sandbox/workspaces/privategit.py",
        '    return git_env(index_file=index, object_dir=private_git / STORE)\n',
        '    return git_env(index_file=index, object_dir=private_git / "objects")\n',
        [f"{UNTOUCHED}::test_parent_git_untouched_by_snapshot_diff_and_teardown[worktree-host]"],
        "corral's object-writing git sees the parent's objects and freshens their mtimes"),
    mutation(
        "manifest-ctime", "workspace-write", "sandbox/workspaces/changes.py",
        '    return None if before == after else "modified"\n',
        '    return None if before[:3] == after[:3] else "modified"\n',
        [f"{CHANGES}::test_rewrite_keeping_size_and_mtime_reported[host]"],
        "a child that rewrites an ignored file and resets size and mtime hides the change"),
    mutation(
        "statcache-fence", "diff", "sandbox/workspaces/statcache.py",
        "    if ctime >= fence_ns:", "    if ctime > fence_ns:",
        ["tests/sandbox/test_diff_speed_stat.py::test_entry_in_the_fence_tick_is_hashed[host]"],
        "an entry recorded in the fence's tick is trusted though a change could keep its ctime"),
    mutation(
        "statcache-ctime", "diff", "sandbox/workspaces/statcache.py",
        "            elif (st_ctime == ctime and st_mtime", "            elif (st_mtime",
        ["tests/sandbox/test_diff_speed_stat.py::"
         "test_in_place_edit_with_restored_size_and_mtime_is_in_the_diff[host]"],
        "a child that rewrites a file in place and restores size and mtime hides the edit"),
    mutation(
        "statcache-valid-only-trusted", "diff", "sandbox/workspaces/statcache.py",
        "    for at in trusted:  # the flags' high byte (big-endian)\n",
        "    for at in [*trusted, *(pos + _STAT.size + hash_size for pos in zero)]:\n",
        [f"{CONF}::test_same_edit_gives_identical_diff[host]"],
        "entries git must hash are marked assume-valid too: git add never looks at the "
        "changed files and the child's edits vanish from the diff"),
    mutation(
        "racy-settle-unchecked", "diff", "sandbox/workspaces/racy.py",
        "                if (st.st_mtime_ns != recorded or st.st_ctime_ns",
        "                if False and (st.st_mtime_ns != recorded or st.st_ctime_ns",
        ["tests/sandbox/test_racy_index.py::"
         "test_settle_racy_re_dates_only_files_as_git_recorded_them"],
        "a fresh checkout's racy entries are re-dated without checking their files are as git "
        "recorded them: a file changed since takes the new stat data and git never sees it"),
    mutation(
        "docker-stand-ins", "docker", "sandbox/backends/standins.py",
        "    return bool(mode & 0o001 or (uid == 0 and mode & 0o100))\n",
        "    return True\n",
        [f"{ROOTPATHS}::test_child_reaches_its_workspace_by_absolute_path[worktree-docker]"],
        "docker as root: the image's /root (0700) blocks the child's own absolute path"),
    mutation(
        "state-dir-in-work-tree", "state dir", "sandbox/state.py",
        '            if os.path.lexists(directory / ".git"):\n',
        '            if False:\n',
        ["tests/sandbox/test_state_dir_placement.py::test_a_state_dir_in_a_working_tree_is_"
         "refused_at_any_depth",
         "tests/executor/test_state_dir_attack.py::test_a_child_cannot_rewrite_another_runs_"
         "patch_through_a_state_dir_in_its_workspace"],
        "a state dir inside a working tree a child writes: it edits another run's diff.patch"),
    mutation(
        "terminal-escape", "terminal", "executor/text.py",
        '    if line.replace("\\t", "").isprintable() and (line.isascii() or not '
        '_INVISIBLE.search(line)):\n',
        '    if True:\n',
        [f"{TERMINAL}::test_diff_on_a_terminal_shows_the_command_a_carriage_return_hides"],
        "ESC[2K and CR in a child's Makefile hide a `curl | sh` line on the terminal"),
    mutation(
        "terminal-diff-tty", "terminal", "executor/cli/runs.py",
        "    if force_escape or sys.stdout.isatty():\n        text, escaped = printable_patch(",
        "    if force_escape:\n        text, escaped = printable_patch(",
        [f"{TERMINAL}::test_diff_on_a_terminal_shows_the_command_a_carriage_return_hides"],
        "`corral diff` writes the child's raw bytes to a terminal"),
    # -- fanout (executor/fanout/, executor/ledger/prune.py) -------------------------------
    mutation(
        "fanout-gc-unverified", "fanout", "executor/ledger/prune.py",
        "    if record.diff_sha256 is None:\n        return False\n",
        "    if True:\n        return True\n",
        ["tests/executor/test_fanout_gc.py::test_a_diff_no_record_holds_is_never_removed"],
        "gc --older-than deletes the only copy of a diff whose record does not hold it"),
    # -- setuid sweep ---------------------------------------------------------------------
    mutation(
        "setid-setgid", "setuid sweep", "sandbox/workspaces/setid.py",
        "SETID_BITS = stat.S_ISUID | stat.S_ISGID", "SETID_BITS = stat.S_ISUID",
        [f"{LEFT}::test_setuid_file_left_in_checkout_is_cleared[fake]"],
        "setgid files the child planted stay armed in the checkout"),
    mutation(
        "setid-nested-git", "setuid sweep", "sandbox/workspaces/walk.py",
        "        if prefix:\n            return list(entries)\n",
        "        if False:\n            return list(entries)\n",
        ["tests/sandbox/test_setid_sweep.py::test_setuid_file_hidden_in_a_nested_git_dir"],
        "a setuid file hidden in sub/.git/ is never cleared"),
    mutation(
        "scan-sweep-clears", "setuid sweep", "sandbox/workspaces/scan.py",
        "if (sweep and mode & SETID_BITS", "if (False and mode & SETID_BITS",
        [f"{LEFT}::test_setuid_file_left_in_checkout_is_cleared[fake]",
         f"{SWEEP}::test_the_diffs_walk_sweeps_everywhere_the_sweep_alone_does"],
        "the diff's walk (the sweep before every diff) clears nothing it scans"),
    mutation(
        "scan-sweep-nested-git", "setuid sweep", "sandbox/workspaces/scan.py",
        "                if sweep and kind == _IFDIR:\n"
        "                    subdirs.append((name, _SWEPT))\n"
        "                continue\n"
        "            inner = excluded\n",
        "                continue\n"
        "            inner = excluded\n",
        [f"{SWEEP}::test_the_diffs_walk_sweeps_everywhere_the_sweep_alone_does"],
        "the diff's walk skips a nested repository's .git (the scan never looks there): a "
        "setuid file in sub/.git/ stays armed"),
    mutation(
        "scan-sweep-too-deep", "setuid sweep", "sandbox/workspaces/scan.py",
        "            if not self.sweep:\n                return []\n            seen = False\n",
        "            return []\n",
        [f"{SWEEP}::test_the_diffs_walk_sweeps_everywhere_the_sweep_alone_does"],
        "the diff's walk stops where the scan does (MAX_DEPTH): a setuid file deeper stays "
        "armed"),
    mutation(
        "scan-sweep-restat", "setuid sweep", "sandbox/workspaces/scan.py",
        "                        info = os.stat(name, dir_fd=fd, follow_symlinks=False)\n",
        "",
        [f"{SWEEP}::test_the_diffs_walk_sweeps_everywhere_the_sweep_alone_does"],
        "the manifest keeps a cleared file's stat from before the sweep: the stat cache and "
        "the workspace-write comparison read a file that is no longer there"),
    # -- git hardening --------------------------------------------------------------------
    mutation(
        "gitsafe-fsmonitor-key", "git hardening", "sandbox/gitsafe.py",
        '("core", "fsmonitor"), ("core", "hookspath"), ("core", "pager"),',
        '("core", "hookspath"), ("core", "pager"),',
        [f"{GIT}::test_parent_refuses_repo_with_executable_local_config[core.fsmonitor]"],
        "a repository whose config sets core.fsmonitor is accepted (it runs on git status)"),
    mutation(
        "gitsafe-subsection", "git hardening", "sandbox/gitsafe.py",
        'leaf = rest.rpartition(".")[2]', "leaf = rest",
        [f"{GIT}::test_parent_refuses_repo_with_executable_local_config"],
        "filter.<any>.clean is not matched, so a filter driver runs on git add"),
    mutation(
        "gitsafe-hooks-path", "git hardening", "sandbox/gitsafe.py",
        '    "-c", "core.hooksPath=/dev/null",\n', "",
        [f"{GIT}::test_worktree_creation_runs_no_hooks_or_filters"],
        "corral's own git runs the repository's hooks"),
    # -- overlay workspaces ---------------------------------------------------------------
    mutation(
        "scratch-merged-view", "overlay", "sandbox/workspaces/model.py",
        "mounts = [Mount(self.root, True, self.scratch.merged)]",
        "mounts = [Mount(self.root, True)]",
        ["tests/sandbox/test_scratch.py::test_teardown_drops_the_layer_and_counts_it[bubblewrap]",
         "tests/executor/test_review_commands.py::test_with_the_grant_the_reviewer_runs_the_tests_and_changes_nothing"
         "[planner-docker]"],
        "a read-only reviewer's commands write the user's checkout, not a throwaway layer"),
    mutation(
        "scratch-size", "overlay", "sandbox/workspaces/scratch.py",
        'data = f"size={size},nr_inodes={inodes},mode=0700".encode()',
        'data = b"mode=0700"',
        ["tests/executor/test_review_commands.py::test_filling_the_layer_stops_at_its_size[bubblewrap]"],
        "a reviewer's commands fill the machine's memory through an unbounded layer"),
    mutation(
        "scratch-gc-live", "overlay", "sandbox/gc.py",
        "        if sandbox_id in alive:\n            continue\n",
        "",
        ["tests/sandbox/test_scratch.py::test_gc_drops_a_crashed_childs_layer_and_never_a_live_one"],
        "gc unmounts a running reviewer's throwaway layer from under it"),
    mutation(
        "scratch-host-refused", "overlay", "sandbox/factory.py",
        'if self.config.type == "host":  # its commands run on the checkout itself',
        "if False:",
        ["tests/sandbox/test_scratch.py::test_the_host_backend_refuses_the_layer"],
        "on the host backend a reviewer's commands write the user's checkout"),
    mutation(
        "overlay-nosuid-nodev", "overlay", "sandbox/workspaces/overlay.py",
        "_MS_NOSUID | _MS_NODEV, layers.options().encode())", "0, layers.options().encode())",
        [f"{OVERLAY}::test_merged_view_is_nosuid_and_nodev_on_the_host[host-overlay]"],
        "a device node the child makes in its merged view opens as that device on the host"),
    mutation(
        "upper-whiteout-rdev", "overlay", "sandbox/workspaces/upper.py",
        "return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0",
        "return stat.S_ISCHR(info.st_mode)",
        [f"{OVERLAY}::test_device_nodes_are_special_files_never_whiteouts[host-overlay]"],
        "any character device the child makes reads as a whiteout: a deletion, unreported"),
    mutation(
        "upper-walk-nofollow", "overlay", "sandbox/workspaces/upper.py",
        "entries.append((entry.name, entry.stat(follow_symlinks=False)))",
        "entries.append((entry.name, entry.stat(follow_symlinks=True)))",
        [f"{OVERLAY}::test_upper_walk_never_follows_a_symlink[host-overlay]"],
        "the upper-layer walk follows a child's link to /etc or /dev on the host"),
    mutation(
        "overlay-layers-hidden", "overlay", "sandbox/workspaces/model.py",
        "        mounts = [Mount(self.root, self.writable)]\n",
        "        mounts = [Mount(self.root, self.writable)]\n"
        "        if self.overlay is not None:\n"
        "            mounts += [Mount(self.overlay.lower, True), "
        "Mount(self.overlay.upper.parent, True)]\n",
        [f"{OVERLAY}::test_child_reaches_neither_layers_nor_the_shared_checkout"
         "[bubblewrap-overlay]"],
        "the child writes its upper layer or the checkout every sibling starts from"),
    mutation(
        "overlay-setid-sweep", "overlay", "sandbox/workspaces/model.py",
        "clear_setid_paths(self.overlay.merged, find_setid(self.overlay.upper))",
        "clear_setid_paths(self.overlay.merged, [])",
        [f"{OVERLAY_CONF}::test_overlay_and_worktrees_give_identical_diffs[host-overlay]"],
        "a setuid file an overlay child made keeps its bit and goes unreported"),
    # -- shared snapshots kept for reuse --------------------------------------------------
    mutation(
        "snapshot-reuse-exact-state", "snapshots", "sandbox/workspaces/statekey.py",
        '    return _key((b"corral-listing-v1", listing), repo, private_git)\n',
        '    return _key((b"corral-listing-v1",), repo, private_git)\n',
        [f"{REUSE}::test_any_other_state_gets_another_snapshot[untracked-same-size]",
         f"{REUSE}::test_any_other_state_gets_another_snapshot[staged]"],
        "a snapshot is reused for any state with the same HEAD: a run starts from files the "
        "parent changed since (or never had), and its diff is against them"),
    mutation(
        "snapshot-alias-exact-bytes", "snapshots", "sandbox/workspaces/statekey.py",
        '    return _key((b"corral-index-v1", trailer), repo, private_git)\n',
        '    return _key((b"corral-index-v1",), repo, private_git)\n',
        [f"{REUSE}::test_any_other_state_gets_another_snapshot[untracked-same-size]",
         f"{REUSE}::test_any_other_state_gets_another_snapshot[deleted]"],
        "a staged index is taken for one an earlier run recorded without comparing its bytes: "
        "the snapshot of that earlier state is leased for a changed one"),
    mutation(
        "snapshot-exclusions-rechecked", "snapshots", "sandbox/workspaces/statekey.py",
        "    return all(_holds(top, entry) for entry in excluded)\n",
        "    return True\n",
        [f"{REUSE}::test_an_exclusion_that_no_longer_holds_is_walked_again"],
        "the last walk's exclusions are trusted after they stopped holding: a nested "
        "repository's files stay out of every later snapshot once its .git is gone"),
    mutation(
        "snapshot-racy-index-date", "snapshots", "sandbox/workspaces/staging.py",
        "        os.utime(index, ns=(original.st_atime_ns, original.st_mtime_ns))\n",
        "        pass\n",
        [f"{REUSE}::test_a_racily_clean_entry_is_hashed_as_git_would"],
        "a file changed in the second its index entry was recorded keeps its old content "
        "in the snapshot (and the snapshot of the earlier state is reused for it)"),
    mutation(
        "snapshot-held-never-evicted", "snapshots", "sandbox/workspaces/snapstore.py",
        "        if held(state_root, directory):\n            continue\n",
        "        if False:\n            continue\n",
        [f"{REUSE}::test_at_most_keep_idle_per_repository_and_never_a_held_one"],
        "keeping the idle snapshots bounded removes one a running child's overlay stands on"),
    mutation(
        "snapshot-shared-git-read-only", "snapshots", "sandbox/workspaces/model.py",
        "                mounts.append(Mount(git_path, False))\n",
        "                mounts.append(Mount(git_path, True))\n",
        [f"{POISON}::test_a_child_of_run_one_cannot_change_what_run_two_starts_from"
         "[bubblewrap-overlay]",
         f"{POISON}::test_a_child_of_run_one_cannot_change_what_run_two_starts_from"
         "[docker-overlay]"],
        "a child writes the shared checkout's git dir or the snapshot's store: the next run "
        "on the same state (any agent, any backend) reads what it planted"),
    # -- MCP servers as tools of children ---------------------------------------------------
    mutation(
        "mcp-confine", "mcp", "executor/mcpclient/servers.py",
        "        if config.confine:\n", "        if config.confine and False:\n",
        [f"{MCP_CONF}::test_confined_server_cannot_reach_the_host[bubblewrap]",
         f"{MCP_CONF}::test_confined_server_cannot_read_the_users_home[docker]"],
        "a confine = true server runs on the host: network, home and credentials reachable"),
    mutation(
        "mcp-start-only-when-holdable", "mcp", "executor/agents/offer.py",
        "    wanted = {server for server, _ in providers(servers, held).values()}\n",
        "    wanted = set(servers)\n",
        [f"{MCP}::test_child_without_the_grant_is_denied_and_no_server_starts[host]"],
        "every installed server starts for every run, even one that can never call it"),
    mutation(
        "mcp-read-only-exact-grant", "mcp", "policies/capability.py",
        "            and explicitly_granted(t, contract.tools, allow_rules))}",
        "            )}",
        [f"{MCP_POLICY}::test_read_only_agent_keeps_a_vouched_tool_only_by_exact_grant"],
        "a pattern such as mcp__s__* opts a read-only agent into a tool"),
    mutation(
        "mcp-child-schema-bound", "mcp", "executor/run/opening.py",
        "    if run.mcp_bound is not None:\n", "    if False:\n",
        [f"{MCP}::test_child_refuses_a_tool_its_server_lists_with_another_schema[host]"],
        "a child is offered a schema its parent was never shown"),
    mutation(
        "mcp-listed-names", "mcp", "executor/mcpclient/servers.py",
        "    if not _plain(tool.name):\n        return (", "    if False:\n        return (",
        [f"{MCP}::test_hostile_tool_names_never_become_native_or_ambiguous[host]"],
        "a server's tool names with spaces, paths or homoglyphs reach the model"),
    # -- network grants and web_fetch (issue 35) -----------------------------------------
    mutation(
        "fetch-redirect-recheck", "network", "executor/tools/web_fetch.py",
        "            target = self._check(current, fetch)\n",
        "            target = self._check(current, fetch) if not hop else parse_url(current)\n",
        [f"{FETCH}::test_a_redirect_to_anything_not_granted_is_refused"],
        "a granted host redirects web_fetch to any host, the grant checked only once"),
    mutation(
        "fetch-private-address", "network", "policies/network.py",
        "    if inner.is_multicast or not inner.is_global or not address.is_global:\n",
        "    if False:\n",
        [f"{FETCH}::test_a_name_resolving_to_a_private_address_is_refused"],
        "a granted name that resolves to an internal address reaches it"),
    mutation(
        "fetch-dns-pinning", "network", "executor/tools/web_fetch.py",
        "    del target\n    return checked[0]\n",
        "    if target.host.literal:\n        return checked[0]\n"
        "    return str(RESOLVER(target.host.name, target.port)[0])\n",
        [f"{FETCH}::test_dns_rebinding_between_check_and_connect_cannot_move_the_request"],
        "the connect resolves the name again: DNS rebinding moves it past the check"),
    mutation(
        "fetch-size-bound", "network", "executor/tools/web_fetch.py",
        "            if len(body) > limit:\n", "            if False:\n",
        [f"{FETCH}::test_a_huge_body_is_truncated_at_the_bound_and_says_so"],
        "a huge body is read whole into corral's memory"),
    mutation(
        "fetch-redirect-rules", "network", "executor/tools/web_fetch.py",
        "            if hop and self.rule is not None and not self.rule(current):\n",
        "            if False:\n",
        [f"{GRANTS}::test_a_definition_only_narrows_the_grant"],
        "a redirect leads web_fetch to a URL the agent's own rules deny"),
    mutation(
        "network-deny-wins", "network", "policies/network.py",
        "        for pattern in self.deny:\n", "        for pattern in ():\n",
        [f"{FETCH}::test_deny_wins_over_allow"],
        "a [network] deny entry is ignored when an allow pattern also matches"),
    mutation(
        "network-wildcard-subdomains", "network", "policies/network.py",
        '            return not host.literal and host.name.endswith("." + self.host.name)\n',
        "            return not host.literal and host.name.endswith(self.host.name)\n",
        [f"{GRANTS}::test_patterns_match_exactly_or_subdomains_only"],
        "*.pypi.org grants evilpypi.org (a suffix, not a subdomain)"),
    mutation(
        "network-numeric-hosts", "network", "policies/network.py",
        '    if _NUMERIC.fullmatch(encoded.split(".")[-1]):  # 2130706433, 0177.0.0.1, 0x7f.1, '
        "127.1\n",
        "    if False:\n",
        [f"{GRANTS}::test_a_bad_pattern_is_refused_with_what_to_write"],
        "a decimal, octal or hex host (2130706433) is taken for a name and may be granted"),
    mutation(
        "fetch-offered-only-with-a-grant", "network", "executor/agents/offer.py",
        '        if tool == "web_fetch" and (network is None or network.empty):\n',
        "        if False:\n",
        [f"{GRANTS}::test_a_claude_agent_listing_webfetch_gets_it_only_with_a_grant"],
        "web_fetch is offered to an agent that lists it though the user granted no host"),
    # -- issue 16: MCP, review flags
    mutation(
        "mcp-bearer-prefix", "mcp-server", "executor/mcpserver/server.py",
        "        return hmac.compare_digest(token, self.token)\n",
        "        return bool(token) and self.token.startswith(token)\n",
        ["tests/executor/test_mcp_server_http.py::test_requests_without_the_token_are_refused"],
        "a prefix of the bearer token (a truncated or guessed start of it) is accepted"),
    mutation(
        "mcp-bearer-trailing", "mcp-server", "executor/mcpserver/server.py",
        "        return hmac.compare_digest(token, self.token)\n",
        "        return token.startswith(self.token)\n",
        ["tests/executor/test_mcp_server_http.py::test_requests_without_the_token_are_refused"],
        "the bearer token with bytes after it is accepted"),
    mutation(
        "mcp-origin-check", "mcp-server", "executor/mcpserver/server.py",
        "            elif any(origin not in self.origins for origin in",
        "            elif False and any(origin not in self.origins for origin in",
        ["tests/executor/test_mcp_server_http.py::test_a_foreign_origin_is_refused"],
        "a web page (another local port's included) drives the HTTP server from a browser"),
    mutation(
        "mcp-apply-confirm", "mcp-server", "executor/mcpserver/handlers.py",
        "confirm=no_person, on_plan=seen)",
        "confirm=lambda plan: True, on_plan=seen)",
        ["tests/executor/test_mcp_server_attacks.py::test_only_a_person_widens_apply"],
        "apply_run on a server with --allow-apply merges files flagged for review"),
    mutation(
        "mcp-apply-widening-args", "mcp-server", "executor/mcpserver/handlers.py",
        "    asked = [name for name in WIDENING if getattr(args, name)]\n",
        "    asked: list[str] = []\n",
        ["tests/executor/test_mcp_server_attacks.py::test_only_a_person_widens_apply"],
        "a client's yes / allow_* reach the apply instead of a refusal naming the command"),
    mutation(
        "mcp-run-id-pattern", "mcp-server", "executor/mcpserver/arguments.py",
        "        if isinstance(value, str) and not re.fullmatch(RUN_ID_PATTERN, value):\n",
        "        if False:\n",
        ["tests/executor/test_mcp_server_attacks.py::test_run_ids_are_ids_never_patterns"],
        "a run id is a glob: '*' names any run, '**' is an internal error"),
    mutation(
        "mcp-ceilings", "mcp-server", "executor/mcpserver/handlers.py",
        "        if value is None or (len(value) if isinstance(value, list) else value) <= limit:",
        "        if True:",
        ["tests/executor/test_mcp_server_attacks.py::"
         "test_jobs_children_and_timeouts_have_the_servers_ceilings"],
        "a client asks for any number of jobs, children or seconds"),
    mutation(
        "review-flags-nested-dirs", "apply", "sandbox/names.py",
        "    for part in parts[:-1]:\n        found.update(_DIRS.get(part, ()))",
        "    for part in parts[:1]:\n        found.update(_DIRS.get(part, ()))",
        ["tests/executor/test_apply_review.py::"
         "test_files_that_run_code_or_steer_agents_are_flagged_at_any_depth"],
        "a nested pkg/.claude/settings.json (hooks run commands) merges without --yes"),
    mutation(
        "review-flags-nested-patterns", "apply", "sandbox/names.py",
        '    return ("" if top else "(?:.*/)?") + "/".join(parts)',
        '    return "" + "/".join(parts)',
        ["tests/executor/test_apply_review.py::"
         "test_files_that_run_code_or_steer_agents_are_flagged_at_any_depth"],
        "a nested eslint.config.js or .github/workflows file merges without --yes"),
    # -- issue 28: review flags derived from discovery
    mutation(
        "review-flags-corral-config", "apply", "sandbox/names.py",
        "           tuple(dict.fromkeys(_place(p) for p in places if p.format == CORRAL)), True),",
        "           (), True),",
        ["tests/executor/test_apply_project_places.py::test_plain_apply_refuses_a_project_"
         "place_or_build_file_without_yes[.corral/environment.toml-corral_config]",
         "tests/test_project_places.py::test_every_project_place_is_flagged_for_review"],
        "a child's .corral/environment.toml merges without --yes: the next --trust-project "
        "run executes its setup under every child and check"),
    mutation(
        "review-flags-agent-places", "apply", "sandbox/names.py",
        "           tuple(dict.fromkeys(_place(p) for p in places if p.format != CORRAL)), True),",
        "           (), True),",
        ["tests/executor/test_apply_project_places.py::test_plain_apply_refuses_a_project_"
         "place_or_build_file_without_yes[initial-data/agent-definitions/x.json-agent_config]",
         "tests/test_project_places.py::test_every_project_place_is_flagged_for_review"],
        "a child's initial-data/agent-definitions/x.json (an agent the loader discovers) "
        "merges without --yes"),
    mutation(
        "review-flags-build-files", "apply", "sandbox/names.py",
        '"deno.jsonc", "hatch_build.py",', '"deno.jsonc",',
        ["tests/executor/test_apply_project_places.py::test_plain_apply_refuses_a_project_"
         "place_or_build_file_without_yes[hatch_build.py-build_script]"],
        "a child's hatch_build.py (hatchling's custom build hook, run on every build) merges "
        "without --yes"),
    mutation(
        "mcp-apply-project-places", "mcp-server", "executor/mcpserver/handlers.py",
        "    def no_person(plan: PatchPlan) -> bool:  # files flagged for review: whatever was "
        "passed\n",
        "    def no_person(plan: PatchPlan) -> bool:\n        return True\n",
        ["tests/executor/test_apply_project_places.py::"
         "test_mcp_apply_run_never_merges_them_even_with_allow_apply"],
        "apply_run on a server with --allow-apply merges a child's .corral/environment.toml "
        "and agent definitions: no person read them"),
    mutation(
        "error-text-continuation", "terminal", "executor/text.py",
        '    pad = " " * len(label) if indent is None else indent\n', '    pad = ""\n',
        [f"{TERMINAL}::test_a_multi_line_error_prints_as_lines_none_posing_as_a_field",
         f"{TERMINAL}::test_a_file_name_in_an_error_cannot_forge_a_hint_line"],
        "a file name holding '\\nhint: ...' prints a hint line of its own in an error"),
    # -- issue 16: defences no test would miss -----------------------------------------------
    mutation(
        "nested-git-read-only", "git hardening", "sandbox/workspaces/model.py",
        "        mounts += [Mount(self.root / nested, False) for nested in self.nested_git]\n",
        "",
        ["tests/sandbox/test_git_mounts.py::test_nested_repository_git_dir_is_read_only_in_"
         "workspace_write[bubblewrap]",
         "tests/sandbox/test_git_mounts.py::test_nested_repository_git_dir_is_read_only_in_"
         "workspace_write[docker]"],
        "a workspace-write child plants sub/.git/hooks/post-commit in a nested repository: "
        "the user's next commit there runs it"),
    mutation(
        "git-pointer-read-only", "git hardening", "sandbox/workspaces/model.py",
        "            mounts.append(Mount(dot_git, False))\n", "            pass\n",
        ["tests/sandbox/test_git_mounts.py::test_top_git_pointer_is_read_only[bubblewrap]",
         "tests/sandbox/test_git_mounts.py::test_top_git_pointer_is_read_only[docker]",
         "tests/sandbox/test_git_mounts.py::test_top_git_pointer_is_read_only[bubblewrap-overlay]"],
        "a worktree child rewrites its .git pointer ('gitdir: /tmp/evil'): git on the host "
        "then reads a repository of the child's choosing there"),
    mutation(
        "snapshot-sandbox-lease", "overlay", "sandbox/workspaces/snapstore.py",
        '            alive = (state_root / "sandboxes" / lease.sandbox).is_dir()\n',
        '            alive = (state_root / "worktrees" / lease.sandbox / "meta.json").is_file()\n',
        ["tests/sandbox/test_snapshot_gc_live.py::test_gc_leaves_the_snapshot_and_mounts_of_"
         "running_overlay_children_whole[host-overlay]",
         "tests/sandbox/test_snapshot_gc_live.py::test_gc_leaves_the_snapshot_and_mounts_of_"
         "running_overlay_children_whole[bubblewrap-overlay]"],
        "gc looks for a sandbox's lease holder in the wrong place and removes the snapshot "
        "checkout under running overlay children"),
    mutation(
        "gc-live-overlay-mounts", "overlay", "sandbox/gc.py",
        "    entries += _orphan_mounts(root, alive)\n",
        "    entries += _orphan_mounts(root, set())\n",
        ["tests/sandbox/test_snapshot_gc_live.py::test_gc_leaves_the_snapshot_and_mounts_of_"
         "running_overlay_children_whole[host-overlay]",
         "tests/sandbox/test_snapshot_gc_live.py::test_gc_leaves_the_snapshot_and_mounts_of_"
         "running_overlay_children_whole[docker-overlay]"],
        "gc takes every overlay mount for an orphan and detaches a running child's workspace "
        "(its directory stays: only reading it back shows the loss)"),
    mutation(
        "gc-unstoppable-kept", "overlay", "sandbox/gc.py",
        "    except SandboxError as exc:\n        return f\"not stopped",
        "    except ValueError as exc:\n        return f\"not stopped",
        [f"{CRASH}::test_gc_that_cannot_stop_one_child_leaves_no_mount_and_cleans_the_"
         "others[docker-overlay]"],
        "a container gc cannot remove stops gc at that sandbox: its overlay and every later "
        "one's stay mounted (found in CI: the next run's tmp cleanup failed with EBUSY)"),
    mutation(
        "gc-kept-unmounted", "overlay", "sandbox/gc.py",
        "            with contextlib.suppress(SandboxError):\n"
        "                unmount(layers.merged)\n\n\ndef _clean_stopped",
        "            pass\n\n\ndef _clean_stopped",
        [f"{CRASH}::test_gc_that_cannot_stop_one_child_leaves_no_mount_and_cleans_the_"
         "others[bubblewrap-overlay]"],
        "a sandbox gc keeps (not stopped, or its diff not captured) stays mounted until the "
        "next gc, or for good"),
    mutation(
        "upper-opaque-dir", "overlay", "sandbox/workspaces/upper.py",
        "            if not whole and not _opaque(child):\n", "            if not whole:\n",
        ["tests/sandbox/test_overlay_opaque.py::test_deletions_under_a_replaced_directory_are_"
         "in_the_diff[top-host-overlay]",
         "tests/sandbox/test_overlay_opaque.py::test_deletions_under_a_replaced_directory_are_"
         "in_the_diff[nested-bubblewrap-overlay]"],
        "after rm -rf d && mkdir d the snapshot's files under d vanish without a deletion in "
        "the diff"),
    mutation(
        "backup-copy-verified", "apply", "executor/apply/backup.py",
        "                    if copied != saved.sha256:\n", "                    if False:\n",
        ["tests/executor/test_apply_backup.py::test_a_backup_copy_that_differs_from_the_file_"
         "stops_the_apply"],
        "an apply goes ahead with a backup copy that differs from the file: a failed apply "
        "restores the wrong bytes"),
    mutation(
        "backup-copy-fsync", "apply", "executor/apply/backup.py",
        '                    with (directory / "files" / name).open("rb+") as handle:\n'
        "                        os.fsync(handle.fileno())\n", "",
        ["tests/executor/test_apply_backup.py::test_every_backup_copy_the_manifest_and_their_"
         "directories_are_synced_before_git_writes"],
        "the backup copies may still be in the page cache when git writes: a power loss "
        "leaves --recover without them"),
    mutation(
        "backup-files-dir-fsync", "apply", "executor/apply/backup.py",
        '            _fsync_dir(directory / "files")\n', "",
        ["tests/executor/test_apply_backup.py::test_every_backup_copy_the_manifest_and_their_"
         "directories_are_synced_before_git_writes"],
        "the backup copies' directory entries are not on disk when git writes"),
    mutation(
        "backup-manifest-fsync", "apply", "executor/apply/backup.py",
        "        handle.flush()\n        os.fsync(handle.fileno())\n",
        "        handle.flush()\n",
        ["tests/executor/test_apply_backup.py::test_every_backup_copy_the_manifest_and_their_"
         "directories_are_synced_before_git_writes"],
        "the manifest that says an apply is under way may be lost with the power"),
    mutation(
        "overlay-nosuid", "overlay", "sandbox/workspaces/overlay.py",
        "_MS_NOSUID | _MS_NODEV, layers.options().encode())",
        "_MS_NODEV, layers.options().encode())",
        ["tests/sandbox/test_overlay_mount_options.py::test_a_setuid_file_the_child_plants_"
         "never_runs_setuid_on_the_host[host-overlay]",
         "tests/sandbox/test_overlay_mount_options.py::test_every_mount_option_is_in_"
         "effect[docker-overlay]"],
        "a setuid file a child plants in its merged view runs setuid on the host"),
    mutation(
        "overlay-nodev", "overlay", "sandbox/workspaces/overlay.py",
        "_MS_NOSUID | _MS_NODEV, layers.options().encode())",
        "_MS_NOSUID, layers.options().encode())",
        ["tests/sandbox/test_overlay_mount_options.py::test_a_device_node_in_the_merged_view_"
         "cannot_be_used[docker-overlay]",
         "tests/sandbox/test_overlay_mount_options.py::test_every_mount_option_is_in_"
         "effect[bubblewrap-overlay]"],
        "a device node in the merged view opens as that device, on the host and in a "
        "container"),
    mutation(
        "overlay-redirect-dir", "overlay", "sandbox/workspaces/overlay.py",
        'MOUNT_OPTIONS = ("redirect_dir=nofollow", "metacopy=off",',
        'MOUNT_OPTIONS = ("metacopy=off",',
        ["tests/sandbox/test_overlay_mount_options.py::test_every_mount_option_is_in_"
         "effect[host-overlay]"],
        "the kernel's default redirect_dir (follow here) honours redirect xattrs in an upper "
        "layer"),
    mutation(
        "overlay-uuid-off", "overlay", "sandbox/workspaces/overlay.py",
        '"xino=off", "uuid=off")', '"xino=off")',
        ["tests/sandbox/test_overlay_mount_options.py::test_every_mount_option_is_in_"
         "effect[bubblewrap-overlay]"],
        "the overlay ties its upper layer to the lower filesystem's uuid (uuid=on here)"),
    mutation(
        "owner-start-time", "state dir", "sandbox/state.py",
        "        return abs(psutil.Process(pid).create_time() - started) < 0.01\n",
        "        return psutil.Process(pid).is_running()\n",
        ["tests/sandbox/test_owner_reuse.py::test_gc_collects_a_sandbox_whose_owner_pid_was_"
         "reused[host-overlay]",
         "tests/sandbox/test_owner_reuse.py::test_gc_removes_snapshots_held_by_a_reused_pid",
         "tests/sandbox/test_owner_reuse.py::test_a_running_run_or_fanout_whose_owner_pid_was_"
         "reused_has_crashed"],
        "a reused pid keeps a dead owner's sandbox, snapshot and 'running' run alive forever"),
    # -- issue 16: nothing outlives its command; checks and reviewers on the record ------
    mutation(
        "supervisor-live-threads", "warm", "sandbox/backends/warm_init.py",
        "            if live:\n",
        "            if live and stat.rpartition(b')')[2][1:2] != b'Z':\n",
        [f"{SURVIVE}::test_nothing_survives_the_command"
         "[bubblewrap-zombie-leader-supervisor-alone]",
         f"{SURVIVE}::test_nothing_survives_the_command[docker-zombie-leader-supervisor-alone]"],
        "a zombie leader whose other thread runs on is skipped by the supervisor's listing: "
        "the thread outlives its command and keeps writing"),
    mutation(
        "host-interrupted-kill", "host", "sandbox/backends/process.py",
        "        except BaseException:\n            _end_interrupted(running)\n            raise\n",
        "",
        [f"{INTERRUPTED}[host]",
         f"{LIFECYCLE}::test_a_stopped_run_is_cancelled_named_and_keeps_its_diff[text-sigterm]"],
        "Ctrl-C or SIGTERM while a host command runs: the command outlives its run, its "
        "workspace and corral, reparented to init"),
    mutation(
        "host-held-stops", "host", "sandbox/backends/process.py",
        "                    self._before[number] = signal.signal(number, self._record)\n",
        "                    pass\n",
        ["tests/sandbox/test_host_interrupt.py::"
         "test_a_stop_during_the_spawn_still_kills_the_command"],
        "a stop that lands inside Popen, after the fork: the command runs on with no "
        "handle left to kill it"),
    Mutation(
        "exec-claim-given-back", "warm",
        (Edit("sandbox/base.py",
              "        claimed = False\n        try:\n            with self._cond:\n",
              "        claimed = False\n        with self._cond:\n            if True:\n"),
         Edit("sandbox/base.py", "                self._busy = claimed = True\n",
              "                self._busy = claimed = True\n        try:\n")),
        (f"{CANCEL}::test_a_stop_as_a_command_claims_the_sandbox_leaves_it_usable[host]",),
        "the claim made before the try that gives it back (as it was): Ctrl-C as the lock "
        "is let go leaves the sandbox claimed, and the run's diff, taken next, waits "
        "forever"),
    mutation(
        "freeze-given-back", "warm", "sandbox/base.py",
        "            if not given:  # Ctrl-C raised as the lock was taken",
        "            if False:  # Ctrl-C raised as the lock was taken",
        [f"{CANCEL}::test_a_stop_as_a_diff_ends_leaves_the_sandbox_usable[host]"],
        "Ctrl-C as a diff's freeze ends: the freeze is never given back and teardown, "
        "which freezes again, waits forever"),
    mutation(
        "bwrap-interrupted-discard", "warm", "sandbox/backends/bwrap.py",
        "            if live is not None:\n                self._discard(live)\n"
        "            raise\n",
        "            raise\n",
        [f"{INTERRUPTED}[bubblewrap]"],
        "Ctrl-C while a bubblewrap command runs: the command goes on writing while the diff "
        "is taken, and the next command is sent to a supervisor still in the last one"),
    mutation(
        "docker-interrupted-discard", "warm", "sandbox/backends/docker.py",
        "                self._discard(live)\n            self._kill_all()\n            raise\n",
        "                pass\n            raise\n",
        [f"{INTERRUPTED}[docker]"],
        "Ctrl-C while a docker command runs: the command goes on writing while the diff is "
        "taken, and the next command is sent to a supervisor still in the last one"),
    mutation(
        "host-leftovers-bwrap", "warm", "sandbox/backends/bwrap.py",
        "        found = namespace_leftovers(live.supervisor, live.namespace, self._cgroup)\n",
        "        found = []\n",
        [f"{SURVIVE}::test_host_does_not_take_the_supervisors_word[bubblewrap]"],
        "the host takes a lying supervisor's 'clean' for the truth (bubblewrap)"),
    mutation(
        "host-leftovers-docker", "warm", "sandbox/backends/docker.py",
        "        return uid_members(self._cgroup_dir, self._uid[0], exclude=exclude) or []\n",
        "        return []\n",
        [f"{SURVIVE}::test_host_does_not_take_the_supervisors_word[docker]"],
        "the host takes a lying supervisor's 'clean' for the truth (docker)"),
    mutation(
        "docker-host-kill", "warm", "sandbox/backends/docker.py",
        "        if str(pid) in members:\n", "        if False:\n",
        [f"{SURVIVE}::test_host_does_not_take_the_supervisors_word[docker]"],
        "the host finds a leftover in the container's cgroup but cannot kill it: the whole "
        "container goes, and the child's next command fails"),
    mutation(
        "docker-late-pause-thawed", "warm", "sandbox/backends/docker.py",
        '            if exc.status_code != 409 or "paused" not in str(exc.explanation or exc):\n'
        "                raise\n",
        "            raise\n",
        [f"{SURVIVE}::test_a_pause_that_lands_after_its_thaw_is_thawed_at_the_next_exec"
         "[docker]"],
        "a pause the engine carries out after its thaw looked leaves the container paused: "
        "every later command of the child fails"),
    mutation(
        "freeze-verify-empty", "warm", "sandbox/base.py",
        "            sb._verify_empty()  # and the kernel agrees that nothing is left\n", "",
        [f"{SURVIVE}::test_freeze_before_a_diff_empties_the_sandbox[bubblewrap]",
         f"{SURVIVE}::test_freeze_before_a_diff_empties_the_sandbox[docker]"],
        "a diff is read while a process of the child still writes the workspace"),
    mutation(
        "warm-unclean-report", "warm", "sandbox/backends/warm.py",
        ' or not self.report.get("clean", False)\n', "\n",
        [f"{SURVIVE}::test_an_unclean_report_stops_the_sandbox[bubblewrap]",
         f"{SURVIVE}::test_an_unclean_report_stops_the_sandbox[docker]"],
        "a supervisor that says it could not kill everything is left running with the survivor"),
    mutation(
        "warm-frame-bound", "warm", "sandbox/backends/warm.py",
        "                if size > _MAX_FRAME:\n", "                if False:\n",
        [f"{SURVIVE}::test_an_oversized_frame_is_a_lost_supervisor[bubblewrap]",
         f"{SURVIVE}::test_an_oversized_frame_is_a_lost_supervisor[docker]"],
        "a supervisor announcing a 1 GiB frame makes the host wait for it past the deadline"),
    mutation(
        "check-on-recorded-diff", "fanout", "executor/fanout/child.py",
        '    patch = run.patch if settings.snapshot is not None else b""\n',
        '    patch = b""\n',
        [f"{CHECKS}::test_a_survivor_cannot_pass_the_check_for_a_diff_that_fails_it[bubblewrap]",
         f"{REPLAY}::test_a_replay_holds_exactly_the_recorded_diff[host]"],
        "the check runs on the base without the child's diff"),
    mutation(
        "replay-applies", "fanout", "sandbox/replay.py",
        "            apply_recorded(sandbox, patch, onto=onto)\n", "            pass\n",
        [f"{REPLAY}::test_a_replay_holds_exactly_the_recorded_diff[bubblewrap]",
         f"{REPLAY}::test_a_patch_that_does_not_apply_is_an_error_and_leaves_nothing[host]"],
        "a replay without the recorded diff: every check judges the base"),
    mutation(
        "replay-disposable", "gc", "sandbox/gc.py",
        "        if meta.disposable:  # a replay: nothing to sweep or capture, only to remove\n",
        "        if False:\n",
        [f"{REPLAY}::test_an_abandoned_replay_is_removed_by_gc_without_a_diff[bubblewrap]"],
        "gc keeps a crashed check's output as if it were a child's diff"),
    mutation(
        "review-on-record", "review", "executor/run/reviews.py",
        "        yield replay.root\n", "        yield run.sandbox.root\n",
        [f"{CATALOG_RUN}::test_reviewers_read_the_recorded_diff_not_the_agents_workspace"],
        "a reviewer reads an ignored file the agent left (in no diff) that approves its work"),
    # -- issue 17: the project's environment --------------------------------------------
    mutation(
        "env-repository-grants", "environment", "policies/environment.py",
        "            diagnostics.append(_ignored(display, key, data.pop(key)))\n",
        "            diagnostics.append(_ignored(display, key, data[key]))\n",
        [f"{ENV}::test_setup_has_network_only_when_granted_and_a_child_never[bubblewrap]",
         f"{ENV_SPEC}::test_a_repository_cannot_grant_itself_anything"],
        "a repository grants its own setup network (or your secrets, or host paths)"),
    mutation(
        "env-child-network", "environment", "sandbox/factory.py",
        "    if isinstance(config, DockerConfig) and environment.image:\n",
        "    config = config.model_copy(update={'network': True})\n"
        "    if isinstance(config, DockerConfig) and environment.image:\n",
        [f"{ENV}::test_setup_has_network_only_when_granted_and_a_child_never[bubblewrap]",
         f"{ENV}::test_setup_has_network_only_when_granted_and_a_child_never[docker]"],
        "a child of an environment whose setup had network has it too"),
    mutation(
        "env-secrets-setup-only", "environment", "sandbox/factory.py",
        "            self.sandbox._env_vars = env.env\n",
        "            self.sandbox._env_vars = {**env.env, **{n: os.environ.get(n, '') for n in "
        "env.spec.secrets}}\n",
        [f"{ENV}::test_a_secret_reaches_setup_and_no_child[bubblewrap]"],
        "a secret meant for setup reaches every child's commands"),
    mutation(
        "env-carry-read-only", "environment", "sandbox/environment.py",
        "        mounts.append(Mount(root / rel, False, source))\n",
        "        mounts.append(Mount(root / rel, True, source))\n",
        [f"{ENV}::test_a_carried_venv_checks_candidates_and_stays_untouched[bubblewrap]"],
        "a child writes through a carried path into your checkout's venv"),
    mutation(
        "env-layer-under-snapshot", "environment", "sandbox/workspaces/overlay.py",
        '        lowers = ":".join(str(path) for path in (self.lower, *self.below))\n',
        '        lowers = ":".join(str(path) for path in (*self.below, self.lower))\n',
        [f"{ENV}::test_the_layer_adds_what_the_snapshot_lacks_and_changes_nothing_of_it"
         "[bubblewrap]"],
        "setup's rewrite of a tracked file replaces the snapshot's in every child"),
    mutation(
        "env-key-inputs", "environment", "sandbox/environment.py",
        '        "inputs": _digest_inputs(repo, spec.inputs),\n',
        '        "inputs": sorted(spec.inputs),\n',
        ["tests/executor/test_environment_keys.py::"
         "test_a_changed_lock_file_builds_again_and_another_file_does_not[bubblewrap]"],
        "a changed lock file reuses the layer its old content built: every child runs the old "
        "dependencies"),
    mutation(
        "env-key-workspace", "environment", "sandbox/environment.py",
        '        "workspace": str(alias) if spec.setup and backend != "host" else None,\n',
        '        "workspace": None,\n',
        ["tests/executor/test_environment_keys.py::"
         "test_the_key_holds_the_workspace_path_in_the_sandbox_not_the_checkouts[bubblewrap]"],
        "a clone under another directory name reuses a layer whose absolute paths name "
        "/workspaces/<the first name>: its venv's scripts fail in every child"),
    mutation(
        "env-setup-cause-network", "environment", "sandbox/setupfailure.py",
        "    if not network and (_NO_NETWORK.search(text) or _NO_INDEX.search(text)):\n",
        "    if network and (_NO_NETWORK.search(text) or _NO_INDEX.search(text)):\n",
        ["tests/executor/test_environment_failures.py::"
         "test_pip_without_the_network_says_to_grant_it[bubblewrap]"],
        "a setup that failed for want of network it was not granted says to fix the setup "
        "instead of granting setup_network"),
    # -- issue 29: a carried venv's interpreter outside /usr -------------------------------
    mutation(
        "carried-interpreter-installation-only", "environment", "sandbox/interpreters.py",
        "            return prefix\n    return None\n",
        "            return prefix\n    return base.parent if base.name == 'bin' else base\n",
        [f"{CARRIED}::test_pyvenv_cfg_cannot_show_a_child_a_host_directory[prefix-bubblewrap]"],
        "a carried pyvenv.cfg (a file of the checkout) names a host directory of secrets as "
        "its interpreter's home, and every child can read it"),
    mutation(
        "carried-interpreter-guard", "environment", "sandbox/interpreters.py",
        '        if path == prefix or path.is_relative_to(prefix):\n'
        '            return f"it holds {path}"\n',
        '        if path == prefix:\n            return f"it holds {path}"\n',
        [f"{CARRIED}::test_pyvenv_cfg_cannot_show_a_child_a_host_directory[prefix-bubblewrap]"],
        "a pyvenv.cfg names a directory above the repository (or your home) shaped like a "
        "Python installation, and all of it is shown to every child"),
    mutation(
        "carried-interpreter-read-only", "environment", "sandbox/interpreters.py",
        "                mounts.setdefault(prefix, Mount(prefix, False))\n",
        "                mounts.setdefault(prefix, Mount(prefix, True))\n",
        [f"{CARRIED}::test_a_venv_of_an_interpreter_outside_usr_checks_candidates"
         "[prefix-bubblewrap]"],
        "a child rewrites the interpreter of your pyenv or uv installation"),
    # -- issue 24: real model servers ---------------------------------------------------
    mutation(
        "openai-empty-content", "models", "executor/models/openai.py",
        '        return {"role": "assistant", "content": message.content,\n',
        '        return {"role": "assistant", "content": message.content or None,\n',
        ["tests/models/test_model_conformance.py::test_tool_call_round_trip[openai]"],
        "an assistant tool-call turn goes with content null: llama.cpp's server refuses "
        "the second request of every child (HTTP 500)"),
    mutation(
        "invalid-request-not-retried", "models", "executor/models/http.py",
        '        refused = rejection(status, text) if code in ("bad_request", "server") '
        'else None\n',
        "        refused = None\n",
        ["tests/models/test_model_rejections.py::test_an_invalid_request_is_reported_once_with_"
         "the_field"],
        "a request the server refused as invalid is retried four times and blamed on the "
        "server"),
    # -- issue 31: prompts that cache, one connection per run, checks that say why ------
    mutation(
        "prompt-workspace-in-system", "models", "executor/run/opening.py",
        '    parts += [f"## Skill\\n\\n{text}" for text in skills]\n    return',
        '    parts += [f"## Skill\\n\\n{text}" for text in skills]\n'
        '    parts.append(task_context(run))\n    return',
        [f"{CACHE}::test_two_runs_of_an_agent_send_the_same_prefix_and_only_the_task_names_"
         "the_workspace[openai]"],
        "the run's random workspace path sits in the system prompt again: no provider can "
        "reuse a cached prefix from one run to the next"),
    mutation(
        "http-client-per-attempt", "models", "executor/models/http.py",
        "            if self._client is None:\n",
        "            if True:\n",
        [f"{CACHE}::test_one_connection_serves_every_turn_of_a_run[openai]"],
        "every model turn builds a new client: a new TLS context and handshake each time"),
    mutation(
        "anthropic-no-cache-marks", "models", "executor/models/anthropic.py",
        "        if self.prompt_cache:\n            _mark_cache(body)\n",
        "",
        [f"{CACHE}::test_anthropic_marks_the_stable_prefix_and_the_newest_message"],
        "a configured prompt cache never marks a breakpoint: Anthropic caches nothing"),
    mutation(
        "cached-tokens-dropped", "models", "executor/models/openai.py",
        'nonneg_int(usage.get("completion_tokens")), _cached(usage)),',
        'nonneg_int(usage.get("completion_tokens"))),',
        [f"{CACHE}::test_cached_tokens_reach_the_record[openai]"],
        "the record never says how much of the prompt came from the cache"),
    mutation(
        "check-hint-dropped", "fanout", "executor/fanout/check.py",
        "        **found,\n",
        "",
        ["tests/executor/test_check_hints.py::test_a_check_with_python_says_the_sandbox_has_"
         "python3[bubblewrap]"],
        "every candidate's `python -m pytest` check fails with 127 and nothing says why"),
    mutation(
        "v4a-add-over-existing", "file tools", "executor/tools/patch.py",
        "            if files.exists(op.path):\n",
        "            if False:\n",
        ["tests/executor/test_apply_patch_v4a.py::test_hostile_or_broken_v4a_patches_write_"
         "nothing"],
        "a V4A Add File silently replaces a file the model never read"),
    mutation(
        "replay-from-diff-unchecked", "apply", "executor/api/replays.py",
        "        files = ([op.path for op in parse_v4a(patch)] if is_v4a(patch)\n"
        "                 else [fp.path for fp in parse_patch(patch)])\n",
        "        files = []\n",
        ["tests/executor/test_replay_from_diff.py::test_a_patch_the_tool_would_refuse_is_"
         "refused_naming_it"],
        "`corral replay from-diff` writes a replay of a broken patch: the failure comes only "
        "after a sandbox was opened for each candidate"),
    # -- issue 20: the seeds, exactly (zuno, pi, catalog, agents show and new) ------------
    mutation(
        "zuno-exact-allowlist-within-scope", "narrowing", "policies/capability.py",
        "        delegates = _meet(contract.delegates, scope)\n",
        "        delegates = contract.delegates\n",
        [f"{CAPABILITY}::test_an_exact_allowlist_is_the_agents_own_within_the_scope",
         "tests/spec/test_zuno_runtime.py::"
         "test_an_exact_allowlist_never_widens_the_parents_capability"],
        "a zuno agent's exact delegates reach past an ancestor's restricting allowlist"),
    mutation(
        "pi-undefined-role-skipped", "models", "executor/models/routing.py",
        "        if not entries:\n            why = ",
        "        if entries is not None and not entries:\n            why = ",
        ["tests/spec/test_pi_runtime.py::"
         "test_an_undefined_role_is_an_error_before_the_run_never_the_parent_model"],
        "an undefined @role is skipped and the parent's model silently runs instead"),
    mutation(
        "basedir-confinement-rule", "catalog", "policies/overrides.py",
        "    return [PermissionRule(tool=tool, action=Action.DENY),\n",
        "    return [\n",
        [f"{CATALOG_RUN}::test_base_dir_re_roots_the_tools_paths_and_confines_them"],
        "a tool under baseDir reads ../secret.txt: re-rooted, but no longer confined"),
    mutation(
        "basedir-search-from-the-root", "catalog", "executor/tools/overrides.py",
        "        return self.inner.exec(argv, cwd=rebase(self.base, cwd), **kwargs)\n",
        "        return self.inner.exec(argv, cwd=cwd, **kwargs)\n",
        [f"{CATALOG_RUN}::test_base_dir_re_roots_the_tools_paths_and_confines_them"],
        "search under baseDir runs ripgrep from the workspace root: every file's matches "
        "come back, re-rooted and so allowed"),
    mutation(
        "show-approval-ignores-ask", "agents show", "executor/agents/views.py",
        "                                        if narrowed.may_ask(tool)),\n",
        "                                        if tool in narrowed.approval_required),\n",
        ["tests/spec/test_effective_tools.py::"
         "test_approval_required_lists_every_tool_a_run_asks_for"],
        "agents show says no call waits for a human where an ask rule makes the run ask"),
    Mutation(
        "agents-new-overwrites", "agents new",
        (Edit("executor/agents/scaffold.py",
              "    if target.exists() or target.is_symlink():\n",
              "    if False:\n"),
         Edit("executor/agents/scaffold.py",
              "os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)",
              "os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)")),
        ("tests/spec/test_agents_new.py::"
         "test_agents_new_never_overwrites_and_never_leaves_a_broken_file",),
        "corral agents new replaces a definition you wrote"),
    # -- runs recorded on a Ray node, landed in the parent's ledger ----------------------
    mutation(
        "remote-record-any-run-id", "remote records", "executor/ledger/imports.py",
        "    if record.run_id not in allowed or not ID_PREFIX.fullmatch(record.run_id):\n",
        "    if False:\n",
        [f"{HOSTILE}[escape]", f"{HOSTILE}[other run]"],
        "a node's record names its own run id: '../../x' writes outside the ledger, another "
        "id replaces or invents a run the parent never planned"),
    mutation(
        "remote-record-diff-unverified", "remote records", "executor/ledger/imports.py",
        '    if record.diff_sha256 != hashlib.sha256(packed["patch"]).hexdigest():\n',
        "    if False:\n",
        [f"{HOSTILE}[patch swapped]"],
        "a node's diff is not the one its record states, and apply merges it"),
    mutation(
        "remote-record-diff-text-trusted", "remote records", "executor/ledger/imports.py",
        '        "diff": run.patch.decode("utf-8", "replace"), "owner": None, '
        '"sandbox_id": None,\n',
        '        "owner": None, "sandbox_id": None,\n',
        [f"{REMOTE}::test_an_honest_pack_lands_with_the_runs_below_it_and_shows_its_exact_diff"],
        "corral diff shows the text a node wrote while apply merges other bytes"),
    mutation(
        "remote-record-preimage-unverified", "remote records", "executor/ledger/imports.py",
        "                and _blob_id(content, len(name)) == name):\n",
        "                ):\n",
        [f"{HOSTILE}[preimage not its blob]"],
        "a node's preimage is not the blob its name says, and apply --3way merges from it"),
    mutation(
        "remote-record-unnamed-run-below", "remote records", "executor/ledger/imports.py",
        "        if not isinstance(claimed, str) or claimed not in linked:\n",
        "        if not isinstance(claimed, str):\n",
        [f"{HOSTILE}[a run below it that it never named]"],
        "a node adds runs to the parent's ledger that no run of the fanout made"),
    mutation(
        "remote-record-any-parent", "remote records", "executor/ledger/imports.py",
        "    if record.parent_run != parent:\n",
        "    if False:\n",
        [f"{HOSTILE}[a parent here]", f"{HOSTILE}[a named run below it, of another parent]"],
        "a node's run claims a parent of the parent's ledger it does not belong to"),
    mutation(
        "remote-running-record-any-run", "remote records", "executor/ledger/imports.py",
        "        if (running.run_id, running.fanout, running.parent_run) != (run_id, fanout, "
        "None):\n",
        "        if False:\n",
        [f"{REMOTE}::test_a_running_remote_child_is_followed_here_then_replaced_by_its_record"],
        "a node's running record is another run's, and the parent's ledger shows it as "
        "this child"),
    mutation(
        "remote-failed-child-left-running", "remote records", "executor/fanout/run.py",
        "    return not (ledger / run_id / PROVISIONAL).is_file()\n",
        "    return True\n",
        [f"{REMOTE}::test_a_remote_child_that_failed_is_recorded_over_its_running_record"],
        "a remote child whose job failed stays 'running' in the parent's ledger for ever"),
    mutation(
        "ray-child-on-any-node", "ray", "executor/scheduling/cluster.py",
        "            num_cpus=0, resources={RESOURCE: 1}, max_retries=0, retry_exceptions=False,\n",
        "            num_cpus=0, max_retries=0, retry_exceptions=False,\n",
        [f"{RAY}::test_results_are_those_of_the_local_fanout_and_the_ledger_works_the_same",
         f"{RAY}::test_a_cancel_reaches_every_node_and_children_not_started_never_start"],
        "a child runs on a node whose sandbox probe failed (or on the driver's)"),
    # -- issue 23: corral serve, the web front door
    mutation(
        "web-token-prefix", "web", "executor/web/guard.py",
        "        return hmac.compare_digest(first, self.token)\n",
        "        return bool(first) and self.token.startswith(first)\n",
        [f"{WEB}/test_serve_attacks.py::test_a_request_without_the_token_is_refused"],
        "a prefix of the URL's token (a truncated or guessed start of it) opens the app"),
    mutation(
        "web-host-check", "web", "executor/web/guard.py",
        "        if not (len(host) == 1 and host[0] in self.hosts):\n",
        "        if False:\n",
        [f"{WEB}/test_serve_attacks.py::test_a_foreign_host_is_refused_dns_rebinding"],
        "a DNS-rebinding page reaches the app under another host name"),
    mutation(
        "web-origin-check", "web", "executor/web/guard.py",
        '        if any(origin not in self.origins and not (origin == b"null" and same_origin)\n',
        '        if False and any(origin not in self.origins and not (origin == b"null" and '
        'same_origin)\n',
        [f"{WEB}/test_serve_attacks.py::test_a_foreign_origin_cannot_change_anything",
         f"{WEB}/test_serve_browser.py::"
         "test_a_page_of_another_origin_cannot_apply_even_with_the_token"],
        "a page of another origin that learned the token applies a run to the checkout"),
    mutation(
        "web-null-origin", "web", "executor/web/guard.py",
        '        same_origin = headers.get(b"sec-fetch-site") == [b"same-origin"]\n',
        "        same_origin = True\n",
        [f"{WEB}/test_serve_attacks.py::test_a_foreign_origin_cannot_change_anything"],
        "an opaque origin (a sandboxed frame, a data: URL) posts changes"),
    mutation(
        "web-form-token", "web", "executor/web/app.py",
        '        return form if form_token_ok(form.get("token"), self.token) else None\n',
        "        return form\n",
        [f"{WEB}/test_serve_attacks.py::test_a_post_without_the_form_token_changes_nothing"],
        "a POST without the form's token changes state"),
    mutation(
        "web-get-applies", "web", "executor/web/app.py",
        'Route("/runs/{run_id}/apply", pages.apply, methods=["POST"])',
        'Route("/runs/{run_id}/apply", pages.apply, methods=["GET", "POST"])',
        [f"{WEB}/test_serve_attacks.py::test_a_get_never_changes_state"],
        "a GET (a link, an image) reaches the handler that applies"),
    mutation(
        "web-csp", "web", "executor/web/guard.py",
        '    (b"content-security-policy", CSP.encode()),\n',
        '    (b"x-content-security-policy-off", CSP.encode()),\n',
        [f"{WEB}/test_serve_attacks.py::test_every_response_carries_the_security_headers"],
        "pages are served without a CSP: an injected inline script would run"),
    mutation(
        "web-referrer", "web", "executor/web/guard.py",
        '    (b"referrer-policy", b"no-referrer"),\n',
        '    (b"referrer-policy", b"unsafe-url"),\n',
        [f"{WEB}/test_serve_attacks.py::test_every_response_carries_the_security_headers"],
        "the token leaves in a Referer to another origin"),
    mutation(
        "web-autoescape", "web", "executor/web/app.py",
        "autoescape=select_autoescape(default=True, default_for_string=True)",
        "autoescape=False",
        [f"{WEB}/test_serve_escaping.py::test_a_field_is_shown_as_text[final_text-script]",
         f"{WEB}/test_serve_browser.py::test_a_child_written_script_never_runs"],
        "a child's answer, file name or output is markup on the page"),
    mutation(
        "web-visible-text", "web", "executor/web/app.py",
        "        return printable(value)\n",
        "        return value\n",
        [f"{WEB}/test_serve_escaping.py::test_a_field_is_shown_as_text[final_text-bidi]"],
        "a bidi override or zero-width character in a child's text reorders what you read"),
    mutation(
        "web-diff-escape", "web", "executor/web/diffs.py",
        '    return Markup(highlight(text, lexer, _FORMATTER).rstrip("\\n"))',
        "    return Markup(text)",
        [f"{WEB}/test_serve_escaping.py::test_a_field_is_shown_as_text[file_content-script]"],
        "a diff's added line is markup on the page"),
    mutation(
        "web-cancel-on-stop", "web", "executor/web/command.py",
        "        left = web.starts.close()\n",
        "        left: list[str] = []\n",
        [f"{WEB}/test_serve_command.py::"
         "test_ctrl_c_cancels_the_runs_it_started_and_records_them"],
        "stopping the server kills the runs it started: they are left crashed, not recorded"),
    # -- an environment's layer under every child and check ------------------------------
    mutation(
        "environment-layer-probe", "environment", "sandbox/factory.py",
        "            verify_layer(self.sandbox, env, base=layers.lower if layers else "
        "workspace.root)\n",
        "            pass\n",
        ["tests/executor/test_environment_presence.py::"
         "test_a_sandbox_its_layer_is_not_mounted_in_never_opens[worktree]"],
        "a sandbox whose environment layer was not mounted runs its commands: a check "
        "without the project's dependencies records the candidate as failed"),
    mutation(
        "environment-layer-gone", "environment", "sandbox/environment.py",
        "    if ref.layer is not None and not ref.layer.is_dir():\n",
        "    if False:\n",
        ["tests/executor/test_environment_presence.py::"
         "test_a_check_whose_layer_went_is_an_error_never_a_failure[bubblewrap]"],
        "a layer pruned between a child and its check: the check runs without it and the "
        "candidate is recorded as failed"),
    mutation(
        "check-error-verdict", "fanout", "executor/fanout/check.py",
        '    if check.get("error"):\n        return "error"\n',
        "",
        ["tests/executor/test_environment_presence.py::"
         "test_a_check_whose_layer_went_is_an_error_never_a_failure[bubblewrap]"],
        "a check that could not run is shown and counted as the candidate's failure"),
    mutation(
        "check-oom-is-an-error", "fanout", "executor/fanout/check.py",
        '"error": _oom(sandbox) if done.oom_killed else None,', '"error": None,',
        ["tests/executor/test_memory_cli.py::"
         "test_a_check_past_the_config_cap_is_oom_killed_not_failed[bubblewrap]"],
        "a check the sandbox's memory cap killed is counted as the candidate's failed test"),
    mutation(
        "bwrap-denial-covers", "denials", "sandbox/backends/bwrap.py",
        '            args += ["--ro-bind", str(cover), target]\n',
        "            pass\n",
        [D + "test_the_sandbox_alone_refuses_a_denied_program[bubblewrap]"],
        "a program the contract denies whole runs under any spelling the reader misses"),
    mutation(
        "docker-denial-covers", "denials", "sandbox/backends/docker.py",
        "        options[\"mounts\"] += [Mount(target=target, source=str(cover), type=\"bind\",\n",
        "        options[\"mounts\"] += [] and [Mount(target=target, source=str(cover), "
        "type=\"bind\",\n",
        [D + "test_the_sandbox_alone_refuses_a_denied_program[docker]"],
        "a program the contract denies whole runs in a docker child under any spelling"),
    mutation(
        "denials-wired", "denials", "executor/run/opening.py",
        "                                         denied=denied_programs(run.capability.layers))",
        "                                         denied=None)",
        [D + "test_200_spellings_of_rm_delete_nothing[bubblewrap]"],
        "a child's sandbox is opened without its contract's denied programs"),
    mutation(
        "denials-last-match", "denials", "policies/permissions.py",
        "            if any(not _has_pattern(r) or _may_match(",
        "            if False and any(not _has_pattern(r) or _may_match(",
        [D + "test_which_denies_remove_a_program"],
        "a program re-allowed by a later rule is removed all the same (or, reversed, a deny "
        "read wrongly removes nothing)"),
    mutation(
        "reader-pipe-to-shell", "shell patterns", "policies/shellwords.py",
        "        piped.append(WILD)\n\n\ndef _deny_compound",
        "\n\ndef _deny_compound",
        ["tests/test_shell_patterns.py::test_a_program_that_runs_text_matches_every_deny_and"
         "_ask_pattern['echo rm f | sh']"],
        "a shell reading a pipe runs what the reader never saw"),
    mutation(
        "reader-runner-variables", "shell patterns", "policies/shellwords.py",
        "    if _sets_runner(words):\n        out.unsure(source)\n",
        "",
        ["tests/test_shell_patterns.py::test_a_program_that_runs_text_matches_every_deny_and"
         "_ask_pattern[\"PS4='$(git push)' bash -xc :\"]"],
        "a variable a shell runs (PS4, BASH_FUNC_*, ENV) hides the command from every deny"),
    mutation(
        "reader-text-runners", "shell patterns", "policies/shellwords.py",
        "        if _runs_text(base, unwrapped[1:]):\n            out.unsure(source)\n",
        "",
        ["tests/test_shell_patterns.py::test_a_program_that_runs_text_matches_every_deny_and"
         "_ask_pattern[\"script -qc 'git push' /dev/null\"]"],
        "script, env -S, hash -p, git -c run text the reader does not see"),
    mutation(
        "reader-stdin-script", "shell patterns", "policies/shellwords.py",
        "        return [*stdin, WILD]  # `sh /dev/fd/0 <<E`",
        "        return []  # `sh /dev/fd/0 <<E`",
        ["tests/test_shell_patterns.py::test_a_program_that_runs_text_matches_every_deny_and"
         "_ask_pattern['sh /dev/fd/0 <<E\\\\ngit push\\\\nE']"],
        "a shell given /dev/fd/0 as its script runs its heredoc unread"),
    mutation(
        "reader-git-options", "shell patterns", "policies/shellwords.py",
        '            out.add(" ".join(["git", *_git_command(unwrapped[1:])]))',
        "            pass",
        ["tests/test_shell_patterns.py::test_git_options_before_the_command_are_read_through"
         "['git -C . push']"],
        "git -C d push is not git push to a deny pattern"),
    mutation(
        "child-git-env", "git", "sandbox/base.py",
        "        merged.update(child_git_env(self._ceilings()))\n",
        "",
        [D + "test_a_repository_the_child_made_runs_nothing[bubblewrap]"],
        "an allowed git status runs the config of a repository the child wrote"),
    mutation(
        "child-git-bare", "git", "sandbox/gitsafe.py",
        '    ("safe.bareRepository", "explicit"),\n',
        "",
        [D + "test_a_repository_the_child_made_runs_nothing[bubblewrap]"],
        "git discovers a bare repository the child wrote, and reads its config"),
    mutation(
        "docker-lifeline", "docker", "sandbox/backends/docker.py",
        "            self._lifeline = self._client.api.attach_socket(\n"
        "                self.id, params={\"stdin\": 1, \"stream\": 1})\n",
        "",
        ["tests/sandbox/test_docker_lifeline.py::"
         "test_a_killed_corral_takes_its_container_with_it"],
        "a SIGKILLed corral leaves its container running until gc"),
    mutation(
        "pattern-shell-cwd", "git", "executor/tools/shell.py",
        "            _never_in_a_made_repository(sandbox.root, args.cwd)\n",
        "            pass\n",
        [D + "test_an_allowed_git_status_never_runs_in_a_repository_the_child_wrote"
         "[bubblewrap]"],
        "a call allowed by a pattern runs inside a repository the child wrote"),
    mutation(
        "trust-imports", "trust", "executor/agents/trust.py",
        "        paths.update(_imported(config, root))\n",
        "",
        ["tests/executor/test_trust.py::"
         "test_a_file_the_ngn_config_imports_from_the_repository_is_digested"],
        "a pull that changes a definition the ngn config imports keeps the trust"),
    mutation(
        "setup-network-host-loopback", "environment", "sandbox/backends/slirp.py",
        '                 "--disable-host-loopback", f"--ready-fd={ready_w}",',
        '                 f"--ready-fd={ready_w}",',
        ["tests/executor/test_environment.py::"
         "test_setup_has_network_only_when_granted_and_a_child_never[bubblewrap]"],
        "a setup granted network reaches services on this machine's loopback"),
    mutation(
        "setup-network-docker-own", "environment", "sandbox/backends/docker.py",
        '            "network_mode": self._network_mode(),\n',
        '            "network_mode": "host" if self.config.network else "none",\n',
        ["tests/executor/test_environment.py::"
         "test_setup_has_network_only_when_granted_and_a_child_never[docker]"],
        "a docker setup granted network shares the host's network and its loopback"),
    mutation(
        "pids-group-made-again", "bubblewrap", "sandbox/backends/limits.py",
        "                    if attempt == _GROUP_ATTEMPTS - 1:\n",
        "                    if True:\n",
        ["tests/sandbox/test_pids_cgroup_race.py::"
         "test_a_group_removed_between_its_making_and_the_sandbox_s_is_made_again"],
        "a sandbox whose group another process's last sandbox removed does not open: a "
        "good candidate's check is lost"),
    # -- issue 28: a workspace-write child's agent and editor configuration --
    mutation(
        "config-read-only-bind", "workspace-write", "sandbox/workspaces/model.py",
        "        mounts += [Mount(path, False) for path in self.protected_config().values()]\n",
        "",
        [CONFIG + "test_existing_config_is_read_only_to_commands[bubblewrap]",
         CONFIG + "test_existing_config_is_read_only_to_commands[docker]"],
        "a workspace-write child writes .claude/settings.json hooks into the checkout"),
    mutation(
        "config-file-tools", "workspace-write", "sandbox/files/resolver.py",
        "        guard = guard and bool(self.protected)\n",
        "        guard = False\n",
        [CONFIG + "test_file_tools_refuse_config_existing_or_not[bubblewrap]"],
        "the Write tool creates .corral/environment.toml in the user's checkout"),
    mutation(
        "config-held", "workspace-write", "sandbox/workspaces/held.py",
        "    if not ws.read_only_config:\n        return ()\n",
        "    return ()\n",
        [CONFIG + "test_config_a_command_creates_is_held_out_of_the_checkout[bubblewrap]"],
        "a command's new .corral/environment.toml stays in the checkout for the next run"),
    mutation(
        "config-held-link", "workspace-write", "sandbox/workspaces/held.py",
        "        if depth == len(parts) or link:\n",
        "        if depth == len(parts):\n",
        [CONFIG + "test_a_link_made_on_the_way_is_held_not_followed[bubblewrap]"],
        "holding follows a link the child made and moves files from outside the workspace"),
    # -- issue 33: a person's shell on a run; what a trust covers ------------------------
    mutation(
        "handwork-stale-by-state-only", "shell", "executor/run/handwork.py",
        "    if (current.diff_sha256, current.state, current.continued_by) != (\n"
        "            seen.diff_sha256, \"pending\", None):",
        "    if (current.state, current.continued_by) != (\"pending\", None):",
        [f"{HANDWORK}::test_a_shell_never_overwrites_a_diff_another_shell_recorded_meanwhile"],
        "a second `corral shell` records while the run stays pending; the first overwrites it"),
    mutation(
        "handwork-earlier-hand-changes", "shell", "executor/run/handwork.py",
        '"hand_changes": sorted({*current.hand_changes, *changed}),',
        '"hand_changes": sorted(changed),',
        [f"{HANDWORK}::test_every_shell_session_keeps_what_earlier_ones_changed_by_hand"],
        "a second session forgets which paths a person changed before"),
    mutation(
        "handwork-failed-session-discarded", "shell", "executor/run/handwork.py",
        "            sandbox.teardown(discard=kept)", "            sandbox.teardown(discard=True)",
        [f"{HANDWORK}::test_a_session_that_fails_half_way_keeps_its_diff_for_gc"],
        "a session that fails half way throws away what the person changed"),
    mutation(
        "trust-digest-names", "trust", "executor/agents/trust.py",
        '        digest.update(display.encode("utf-8", "surrogateescape") + b"\\0")\n', "",
        [f"{TRUST}::test_a_rename_and_a_change_of_the_ngn_config_alone_lapse_trust"],
        "a renamed definition keeps the trust given to another name"),
    mutation(
        "trust-ngn-config", "trust", "executor/agents/trust.py",
        '        paths[".ngn/config.json"] = config\n', "",
        [f"{TRUST}::test_a_rename_and_a_change_of_the_ngn_config_alone_lapse_trust"],
        "a pull that changes .ngn/config.json (profiles, models) keeps the trust"),
    mutation(
        "trust-environment", "trust", "executor/agents/trust.py",
        '"environment": _environment_files(root)}', '"environment": {}}',
        [f"{TRUST}::test_trust_covers_the_environment_file_and_a_skip_is_said",
         f"{TRUST}::test_every_file_of_the_devcontainer_and_its_dockerfile_lapse_trust"],
        "a pull that changes .corral/environment.toml runs its new setup under the old trust"),
    # -- issue 32 (second half): bundled agents below every source, image tags, ngn connection --
    Mutation(
        "bundled-agents-win", "agents",
        (Edit("policies/loader/registry.py",
              "    if bundled_wanted() if bundled is None else bundled:\n"
              "        _load_all(result, bundled_candidates(), Scope.BUNDLED, options)\n", ""),
         Edit("policies/loader/registry.py",
              "    if result.zuno_settings:  # only a zuno.json sets these\n",
              "    if bundled_wanted() if bundled is None else bundled:\n"
              "        _load_all(result, bundled_candidates(), Scope.BUNDLED, options)\n"
              "    if result.zuno_settings:  # only a zuno.json sets these\n")),
        ("tests/test_bundled_agents.py::"
         "test_personal_project_and_imported_definitions_replace_them",),
        "corral's own reviewer replaces the user's or the project's agent of the same name: "
        "a run gets tools and instructions nobody in the repository wrote"),
    mutation(
        "image-tag-unchecked", "docker", "sandbox/image/__init__.py",
        "    if not _REFERENCE.fullmatch(image):\n", "    if False:\n",
        ["tests/test_image_build.py::test_a_bad_tag_is_refused_before_any_program_runs"],
        "a tag that is no image reference reaches docker build and the builder (a failure "
        "after debootstrap, not a usage error naming the tag)"),
    mutation(
        "ngn-connection-not-inherited", "models", "executor/models/routing.py",
        "    provider = explicit or inherited or (None if sep else config.default_provider)\n",
        "    provider = explicit or (None if sep else config.default_provider)\n",
        ["tests/spec/test_ngn_spec.py::"
         "test_model_without_provider_runs_on_the_parent_connection"],
        "an ngn child with a bare model and no provider goes to default_provider (another "
        "connection, other credentials) instead of its parent's connection"),
    # -- issue 33: the audit's gaps (gc, leftovers, environments, supervisor, Ray, branch,
    # remote packs, the shell reader); tests spelled out here so merges stay clean --------
    mutation(
        "gc-kept-not-alive", "gc", "sandbox/gc.py",
        '        if entry.action == "kept":\n            alive.add(state.id)\n', "",
        ["tests/sandbox/test_gc_kept.py::"
         "test_a_sandbox_gc_cannot_stop_stays_whole_and_a_stale_one_beside_it_goes"],
        "gc keeps a sandbox it cannot stop, then removes its running container as an orphan"),
    mutation(
        "gc-not-stopped-cleaned", "gc", "sandbox/gc.py",
        '    if why is not None:\n        return GcEntry(sandbox_id=state.id, action="kept", '
        'detail=f"{why}; run gc again")\n', "",
        ["tests/sandbox/test_gc_kept.py::"
         "test_a_sandbox_gc_cannot_stop_stays_whole_and_a_stale_one_beside_it_goes"],
        "gc diffs and removes the worktree of a sandbox whose container may still run"),
    mutation(
        "gc-orphan-containers-any", "gc", "sandbox/gc.py",
        "        if sandbox_id not in alive:\n", "        if True:\n",
        ["tests/sandbox/test_gc_kept.py::"
         "test_a_sandbox_gc_cannot_stop_stays_whole_and_a_stale_one_beside_it_goes"],
        "gc's orphan sweep removes the containers of sandboxes it keeps"),
    mutation(
        "leftovers-cgroup-ignored", "warm", "sandbox/backends/leftovers.py",
        "    if cgroup is not None and namespace is not None:\n", "    if False:\n",
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_the_namespace_holds_every_descendant_of_the_supervisor_and_nothing_else"],
        "a grandchild the children file misses (being reparented) is not a leftover"),
    mutation(
        "leftovers-supervisor-counted", "warm", "sandbox/backends/leftovers.py",
        "            if pid != supervisor and pid_namespace(pid) == namespace:\n",
        "            if pid_namespace(pid) == namespace:\n",
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_the_namespace_holds_every_descendant_of_the_supervisor_and_nothing_else"],
        "the supervisor counts as its own leftover: every sandbox is stopped after a command"),
    mutation(
        "leftovers-other-namespace", "warm", "sandbox/backends/leftovers.py",
        "            if pid != supervisor and pid_namespace(pid) == namespace:\n",
        "            if pid != supervisor:\n",
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_the_namespace_holds_every_descendant_of_the_supervisor_and_nothing_else"],
        "a cgroup member outside the namespace (bwrap itself) counts as a leftover"),
    mutation(
        "leftovers-cgroup-dir", "warm", "sandbox/backends/leftovers.py",
        '        return mounts["pids"] / paths["pids"].lstrip("/")\n',
        '        return mounts["pids"]\n',
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_the_namespace_holds_every_descendant_of_the_supervisor_and_nothing_else"],
        "a container's cgroup is read as the whole hierarchy: every process of the machine"),
    mutation(
        "leftovers-effective-uid-only", "warm", "sandbox/backends/leftovers.py",
        "        if uids is not None and uid in uids:\n",
        "        if uids is not None and uid == uids[1]:\n",
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_a_uid_counts_as_real_or_effective_and_the_excluded_never"],
        "a leftover that changed its effective uid (real uid still the command's) is missed"),
    mutation(
        "leftovers-exclude-ignored", "warm", "sandbox/backends/leftovers.py",
        "        if pid in exclude:\n            continue\n", "",
        ["tests/sandbox/test_leftovers_kernel.py::"
         "test_a_uid_counts_as_real_or_effective_and_the_excluded_never"],
        "the docker supervisor counts as a leftover of its own container"),
    mutation(
        "env-inputs-content", "environment", "sandbox/environment.py",
        "            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()\n",
        '            found[name] = "present"\n',
        ["tests/executor/test_environment_guards.py::"
         "test_the_key_follows_a_lock_files_content_never_what_a_symlink_names",
         "tests/executor/test_environment_keys.py::"
         "test_a_changed_lock_file_builds_again_and_another_file_does_not[bubblewrap]"],
        "a lock file changed between runs reuses the layer its old content built"),
    mutation(
        "env-input-symlink", "environment", "sandbox/environment.py",
        "            if path.is_symlink() or not path.is_file():\n",
        "            if not path.is_file():\n",
        ["tests/executor/test_environment_guards.py::"
         "test_the_key_follows_a_lock_files_content_never_what_a_symlink_names"],
        "a repository's input symlinked to a file of yours is read into the key"),
    mutation(
        "env-key-owner", "environment", "sandbox/environment.py",
        '"format": _FORMAT, "backend": backend, "owner": list(owner),',
        '"format": _FORMAT, "backend": backend,',
        ["tests/executor/test_environment_guards.py::test_builds_for_two_uids_never_share_a_key"],
        "a layer built as root is handed to children that run as uid 1000"),
    mutation(
        "env-rebuild-in-use", "environment", "sandbox/environment.py",
        "        if rebuild and key in _in_use(state_root):\n", "        if False:\n",
        ["tests/executor/test_environment_guards.py::"
         "test_an_environment_in_use_is_neither_rebuilt_nor_pruned_under_its_child"],
        "`corral env build --rebuild` replaces the layer under a running child"),
    mutation(
        "env-prune-in-use", "environment", "sandbox/environment.py",
        '        if info.key in busy or info.status == "building":\n',
        '        if info.status == "building":\n',
        ["tests/executor/test_environment_guards.py::"
         "test_an_environment_in_use_is_neither_rebuilt_nor_pruned_under_its_child"],
        "`corral env prune` removes the layer a running child uses"),
    mutation(
        "env-layer-binds-writable", "environment", "sandbox/environment.py",
        "        mounts += [Mount(root / rel, False, ref.layer / rel)\n",
        "        mounts += [Mount(root / rel, True, ref.layer / rel)\n",
        ["tests/executor/test_environment_guards.py::"
         "test_a_path_only_the_layer_holds_never_changes_the_layer[worktree]"],
        "a worktree child writes the layer every sibling and later run shares"),
    mutation(
        "warm-init-unclean-reported-clean", "warm", "sandbox/backends/warm_init.py",
        "            if time.monotonic() > limit:\n                return survivors, False\n",
        "            if time.monotonic() > limit:\n                return survivors, True\n",
        ["tests/sandbox/test_warm_init_supervisor.py::"
         "test_a_survivor_that_will_not_die_is_reported_unclean"],
        "a survivor the supervisor could not kill is reported clean: the sandbox goes on"),
    mutation(
        "warm-init-cap-not-cut", "warm", "sandbox/backends/warm_init.py",
        "                            self.send(kind, chunk[:room])\n",
        "                            self.send(kind, chunk)\n",
        ["tests/sandbox/test_warm_init_supervisor.py::"
         "test_output_past_the_cap_is_cut_and_the_report_says_how_much"],
        "a command's output past its cap reaches the host whole"),
    mutation(
        "warm-init-cap-not-said", "warm", "sandbox/backends/warm_init.py",
        '"cpu": max(0.0, cpu), "out_bytes": total[b"o"], "err_bytes": total[b"e"],',
        '"cpu": max(0.0, cpu), "out_bytes": kept[b"o"], "err_bytes": kept[b"e"],',
        ["tests/sandbox/test_warm_init_supervisor.py::"
         "test_output_past_the_cap_is_cut_and_the_report_says_how_much"],
        "output cut at the cap is reported as all there was"),
    mutation(
        "warm-init-subreaper", "warm", "sandbox/backends/warm_init.py",
        '        if self.mode == "uid":\n            _prctl(_PR_SET_CHILD_SUBREAPER, 1)\n', "",
        ["tests/sandbox/test_warm_init_supervisor.py::"
         "test_an_orphan_is_reparented_to_the_uid_supervisor_and_reaped"],
        "a docker command's orphans go to the container's init, not to the supervisor"),
    mutation(
        "warm-init-input-bound", "warm", "sandbox/backends/warm_init.py",
        "        if len(self.inbox) > _MAX_INPUT:\n", "        if False:\n",
        ["tests/sandbox/test_warm_init_supervisor.py::"
         "test_a_host_sending_past_the_input_bound_is_no_host"],
        "whatever writes the supervisor's stdin makes it hold any amount in memory"),
    mutation(
        "warm-frame-bound-larger", "warm", "sandbox/backends/warm.py",
        "_MAX_FRAME = 64 << 20\n", "_MAX_FRAME = 128 << 20\n",
        [f"{SURVIVE}::test_a_frame_one_byte_over_the_bound_is_a_lost_supervisor[bubblewrap]",
         f"{SURVIVE}::test_a_frame_one_byte_over_the_bound_is_a_lost_supervisor[docker]"],
        "the host takes (and waits for) frames past the 64 MiB it documents"),
    mutation(
        "node-place-any-id", "ray", "executor/scheduling/node.py",
        '    if not re.fullmatch(r"[0-9a-fA-F]{8,64}", node_id):\n', "    if False:\n",
        ["tests/executor/test_node_place.py::"
         "test_a_node_id_that_is_no_hex_id_names_no_directory[../x]",
         "tests/executor/test_node_place.py::test_a_node_id_that_is_no_hex_id_names_no_directory"
         "[0123456789abcdef/../../x]"],
        "a node id of '../x' puts the node's place (its state, its ledger) beside the base"),
    mutation(
        "ray-flag-events-unbounded", "ray", "executor/scheduling/raytask.py",
        "        pending += events[: max(MAX_PENDING - len(pending), 0)]\n",
        "        pending += events\n",
        ["tests/executor/test_ray_bounds.py::"
         "test_the_flag_keeps_at_most_max_pending_events_of_a_job",
         "tests/executor/test_ray_bounds.py::"
         "test_the_drivers_flag_actor_holds_at_most_max_pending_events_of_a_job"],
        "a job that reports without end fills the driver's flag actor"),
    mutation(
        "ray-relay-events-unbounded", "ray", "executor/scheduling/raytask.py",
        "            if len(self.events) < MAX_PENDING:\n", "            if True:\n",
        ["tests/executor/test_ray_bounds.py::"
         "test_the_flag_keeps_at_most_max_pending_events_of_a_job"],
        "a job that reports without end fills its node's memory between two posts"),
    mutation(
        "ray-jobs-unbounded", "ray", "executor/scheduling/cluster.py",
        "                while self._queue and len(self._inflight) < self._jobs:\n",
        "                while self._queue:\n",
        ["tests/executor/test_ray_bounds.py::"
         "test_jobs_bounds_the_whole_cluster_and_the_rest_wait_in_order"],
        "--jobs bounds nothing on a cluster: every child starts at once"),
    mutation(
        "ray-third-retry", "ray", "executor/scheduling/cluster.py",
        "        if handle.attempts >= 2 or self._cancellation.cancelled",
        "        if handle.attempts >= 3 or self._cancellation.cancelled",
        ["tests/executor/test_ray_bounds.py::"
         "test_a_job_lost_twice_is_failed_never_tried_a_third_time"],
        "a job that kills its node is tried again and again"),
    mutation(
        "branch-unsafe-diff", "apply", "executor/apply/branch.py",
        "    if plan.problems:\n        raise MergeRefused(\"the diff is not safe to keep",
        "    if False:\n        raise MergeRefused(\"the diff is not safe to keep",
        ["tests/executor/test_apply_branch.py::"
         "test_a_diff_apply_would_refuse_is_no_branch_either"],
        "a symlink to /etc/passwd is committed on a branch someone checks out later"),
    mutation(
        "branch-running-run", "apply", "executor/apply/branch.py",
        "    if record.status is RunStatus.RUNNING:\n", "    if False:\n",
        ["tests/executor/test_apply_branch.py::"
         "test_a_running_run_an_empty_one_and_a_tampered_one_make_no_branch"],
        "a branch is made from a diff that is not final yet"),
    mutation(
        "branch-empty-diff", "apply", "executor/apply/branch.py",
        "    if not patch:\n        raise ExecutorError(f\"run {record.run_id} changed nothing\", "
        "code=\"empty_diff\")\n", "",
        ["tests/executor/test_apply_branch.py::"
         "test_a_running_run_an_empty_one_and_a_tampered_one_make_no_branch"],
        "a run that changed nothing is blamed on HEAD having moved"),
    mutation(
        "branch-unverified", "apply", "executor/apply/branch.py",
        "    patch = verified_patch(ledger, record, allow_unverified=options.allow_unverified)\n",
        "    patch = (ledger / record.run_id / \"diff.patch\").read_bytes()\n",
        ["tests/executor/test_apply_branch.py::"
         "test_a_running_run_an_empty_one_and_a_tampered_one_make_no_branch"],
        "a diff.patch changed in the ledger after the run is committed as the run's"),
    mutation(
        "imports-max-below", "remote records", "executor/ledger/imports.py",
        "    if not isinstance(below, list) or len(below) > MAX_BELOW:\n",
        "    if not isinstance(below, list):\n",
        [f"{REMOTE}::test_more_runs_below_than_the_bound_are_refused_whole"],
        "a node fills the parent's ledger with any number of runs below one child"),
    mutation(
        "imports-pack-symlink", "remote records", "executor/ledger/imports.py",
        '        return path.read_bytes() if path.is_file() and not path.is_symlink() else b""\n',
        '        return path.read_bytes() if path.is_file() else b""\n',
        [f"{REMOTE}::test_a_symlinked_file_in_a_nodes_run_dir_is_never_packed"],
        "a node packs what a symlink in a run's directory names (a file of the node's user)"),
    mutation(
        "imports-pack-preimage-symlink", "remote records", "executor/ledger/imports.py",
        "                     if item.is_file() and not item.is_symlink()}",
        "                     if item.is_file()}",
        [f"{REMOTE}::test_a_symlinked_file_in_a_nodes_run_dir_is_never_packed"],
        "a node packs what a symlinked preimage names"),
    mutation(
        "shell-arith-substitution", "shell patterns", "policies/shellsyntax.py",
        ' or not _ARITH_OK.fullmatch(body) or "$(" in body:',
        " or not _ARITH_OK.fullmatch(body):",
        [f"{SHELL}::test_an_arithmetic_expansion_hides_no_substitution"],
        "`echo $(( $(rm -rf x) ))` passes a deny of rm: the substitution is not read"),
    # -- issue 35: allow-listed egress for commands (--net allow) ------------------------
    mutation(
        "egress-grant-check", "egress", "sandbox/egress/checks.py",
        "    refusal = grant.refusal(host, port)\n", "    refusal = None\n",
        [f"{EGRESS}::test_connect_tricks_refused[suffix-bubblewrap]",
         f"{EGRESS}::test_granted_host_reached_unlisted_refused[docker]"],
        "the proxy connects a command to any host that resolves, granted or not"),
    mutation(
        "egress-port-check", "egress", "sandbox/egress/checks.py",
        "    refusal = grant.refusal(host, port)\n",
        "    refusal = None if any(p.host_matches(host) for p in grant.allow) else "
        "grant.refusal(host, port)\n",
        [f"{EGRESS}::test_connect_tricks_refused[other-port-bubblewrap]"],
        "a CONNECT to a listed name reaches whatever listens on any port of it"),
    mutation(
        "egress-loopback", "egress", "sandbox/egress/checks.py",
        "        if _loopback(address) and address not in TEST_LOOPBACK:\n",
        "        if False:\n",
        [f"{EGRESS_PROXY}::test_allow_private_never_opens_this_machines_loopback"],
        "allow_private = [\"127.0.0.1\"] lets commands reach corral serve and local databases"),
    mutation(
        "egress-address-check", "egress", "sandbox/egress/checks.py",
        "        why = None if address in TEST_LOOPBACK else address_refusal(address, "
        "grant.private)\n", "        why = None\n",
        [f"{EGRESS}::test_granted_literals_of_loopback_and_metadata_still_refused[bubblewrap]"],
        "a granted name or literal that is a metadata or private address is connected to"),
    mutation(
        "egress-pinned-address", "egress", "sandbox/egress/proxy.py",
        "            return socket.create_connection((verdict.address, verdict.port),",
        "            return socket.create_connection((__import__(\"sandbox.egress.checks\", "
        "fromlist=[\"x\"]).RESOLVER(verdict.host, verdict.port)[-1], verdict.port),",
        [f"{EGRESS}::test_dns_rebinding_between_check_and_connect[bubblewrap]"],
        "the proxy resolves again to connect: DNS rebinding moves a checked name elsewhere"),
    mutation(
        "egress-connection-bound", "egress", "sandbox/egress/proxy.py",
        "            full = self._closed or len(self._open) >= self.max_connections\n",
        "            full = self._closed\n",
        [f"{EGRESS_PROXY}::test_connections_beyond_the_bound_are_refused"],
        "a command opens connections without bound, each a thread of corral's"),
    mutation(
        "egress-idle-timeout", "egress", "sandbox/egress/proxy.py",
        "                if not ready:\n                    return\n",
        "                if not ready:\n                    continue\n",
        [f"{EGRESS_PROXY}::test_an_idle_tunnel_is_closed"],
        "an idle tunnel is held open forever"),
    mutation(
        "egress-setns", "egress", "sandbox/egress/netns.py",
        "                _setns(fd)\n", "                pass\n",
        [f"{EGRESS}::test_granted_host_reached_unlisted_refused[bubblewrap]"],
        "the proxy's port is opened on this machine's loopback instead of the sandbox's"),
    mutation(
        "egress-own-namespace", "egress", "sandbox/egress/netns.py",
        "        if _namespace(pid) == _namespace(os.getpid()):\n", "        if False:\n",
        [f"{EGRESS_PROXY}::test_no_listener_in_this_machines_namespace"],
        "a sandbox sharing this machine's network gets a proxy port every local process reaches"),
    mutation(
        "egress-docker-port", "egress", "sandbox/backends/docker.py",
        "            self._egress_port = self.egress.serve(listen_in_namespace(self._init_pid))",
        "            self._egress_port = None",
        [f"{EGRESS}::test_granted_host_reached_unlisted_refused[docker]"],
        "docker: --net allow opens nothing (the container's namespace gets no proxy port)"),
    mutation(
        "egress-host-backend", "egress", "sandbox/factory.py",
        '    if egress is not None and chosen.type not in ("bubblewrap", "docker"):',
        "    if False:",
        [f"{EGRESS_PROXY}::test_host_backend_refuses_egress"],
        "--net allow on the host backend says 'filtered' over this machine's whole network"),
    mutation(
        "egress-narrow-shell", "egress", "executor/agents/offer.py",
        '    if "shell" not in capability.visible_tools():\n', "    if False:\n",
        [f"{EGRESS_RUN}::test_a_definition_without_the_shell_gets_no_proxy"],
        "an agent without the shell still gets a proxy (and agents show says so)"),
    mutation(
        "egress-narrow-deny", "egress", "executor/agents/offer.py",
        '    if any(tool_matches(sel, "web_fetch") for sel in contract.denied_tools) or any(',
        "    if False and any(",
        [f"{EGRESS_RUN}::test_a_definition_denying_web_fetch_keeps_its_commands_offline"],
        "a definition that disallows WebFetch still gets the user's hosts for its commands"),
    mutation(
        "egress-socket-read-only", "egress", "sandbox/backends/bwrap.py",
        '            args += ["--ro-bind", str(self._egress_dir), SANDBOX_DIR]',
        '            args += ["--bind", str(self._egress_dir), SANDBOX_DIR]',
        [f"{EGRESS}::test_the_socket_route_without_root[bubblewrap]"],
        "without root, a command replaces the proxy's socket with one of its own"),
    mutation(
        "egress-setup-no-slirp", "egress", "sandbox/environment.py",
        '            "limits": limits, "network": spec.setup_network,',
        '            "limits": limits, "network": spec.setup_network or bool(spec.setup_allow),',
        [f"{EGRESS_RUN}::test_setup_with_a_domain_list_goes_through_the_proxy[bubblewrap]"],
        "a setup granted a domain list also gets the whole network through slirp"),
    mutation(
        "egress-setup-proxy", "egress", "sandbox/environment.py",
        '    if not spec.setup_allow or spec.setup_network or backend == "host":\n'
        '        return None\n', "    return None\n",
        [f"{EGRESS_RUN}::test_setup_with_a_domain_list_goes_through_the_proxy[docker]"],
        "setup_allow opens nothing: the setup's pip finds no index"),
    # -- issue 28: a Ray node's directory, siblings' ids, branch names, one glob dialect --
    mutation(
        "private-dir-unverified", "ray", "sandbox/state.py",
        "    problem = private_problem(path)\n",
        "    problem = None\n",
        [f"{NODE_PLACE}::test_a_base_another_user_made_first_is_refused",
         f"{NODE_PLACE}::test_a_symlink_in_place_of_the_base_is_refused",
         f"{NODE_PLACE}::test_a_base_others_may_reach_is_refused_not_tightened[group]",
         f"{NODE_PLACE}::test_the_override_is_made_private_and_checked_the_same_way"],
        "another local user pre-creates <tmp>/corral-ray-<uid> (or a symlink, or a "
        "group-writable dir): the node's snapshots, config and diffs are theirs to read "
        "and rewrite"),
    Mutation(
        "ray-node-dir-plain-mkdir", "ray",
        (Edit("executor/scheduling/node.py",
              "    place = _base() / node_id[:16]\n    private_dir(place, verify=True, "
              "hint=_HINT)\n",
              "    place = _base() / node_id[:16]\n    place.mkdir(mode=0o700, parents=True, "
              "exist_ok=True)\n"),),
        (f"{NODE_PLACE}::test_a_node_dir_another_user_made_first_is_refused",
         f"{NODE_PLACE}::test_a_symlink_in_place_of_the_node_dir_is_refused"),
        "the node's own directory is taken as it is found: another user's, or a symlink"),
    mutation(
        "remote-record-sibling-id", "remote records", "executor/ledger/imports.py",
        "        if below in planned:\n",
        "        if False:\n",
        [f"{SIBLINGS}::test_a_sibling_s_running_record_is_never_replaced",
         f"{SIBLINGS}::test_a_sibling_s_id_is_refused_before_the_sibling_reports"],
        "a node names a sibling's planned id as its delegated child: the sibling's running "
        "record is replaced and its own result is later refused"),
    mutation(
        "remote-record-below-not-fresh", "remote records", "executor/ledger/imports.py",
        "        if os.path.lexists(ledger / below):\n",
        "        if False:\n",
        [f"{SIBLINGS}::test_a_run_below_that_this_ledger_holds_in_any_form_is_refused"],
        "a node's delegated child replaces a running record of another fanout's child"),
    mutation(
        "remote-record-run-twice", "remote records", "executor/ledger/imports.py",
        "    if len(set(ids)) != len(ids):\n",
        "    if False:\n",
        [f"{SIBLINGS}::test_a_pack_that_holds_one_run_twice_is_refused[itself]",
         f"{SIBLINGS}::test_a_pack_that_holds_one_run_twice_is_refused[one child twice]"],
        "a pack holds one run twice: the planned run below itself replaces its own record"),
    mutation(
        "remote-record-local-fields", "remote records", "executor/ledger/imports.py",
        '        "notes": [*run.record.notes, *notes], **_local_only()})\n',
        '        "notes": [*run.record.notes, *notes]})\n',
        [f"{SIBLINGS}::test_what_only_this_machine_decides_is_reset_as_a_run_lands"],
        "a node marks its run applied, continued by another run, or changed by hand"),
    mutation(
        "branch-name-shadows-ref", "apply", "executor/apply/branch.py",
        '            raise _ambiguous(branch, f"{other} exists")\n',
        "            pass\n",
        [f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[origin/main]",
         f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[v1]"],
        "--branch origin/main makes a branch that shadows the remote-tracking ref"),
    mutation(
        "branch-name-dwim", "apply", "executor/apply/branch.py",
        "    if resolved.returncode == 0:  # refs/heads/<branch> does not exist: git means "
        "another\n",
        "    if False:\n",
        [f"{BRANCH_NAMES}::test_names_git_resolves_otherwise_are_refused"],
        "--branch heads/main or an abbreviated commit id: git reads the name as another ref"),
    mutation(
        "branch-name-full-ref", "apply", "executor/apply/branch.py",
        '    if branch.startswith("refs/"):\n',
        "    if False:\n",
        [f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[refs/heads/main]",
         f"{BRANCH_NAMES}::test_the_cli_refuses_a_shadowing_name_says_why_and_changes_nothing"],
        "--branch refs/heads/main makes refs/heads/refs/heads/main"),
    mutation(
        "branch-name-head", "apply", "executor/apply/branch.py",
        '    if branch == "@" or _PSEUDO.fullmatch(branch):\n',
        "    if False:\n",
        [f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[@]",
         f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[ORIG_HEAD]"],
        "--branch @ or ORIG_HEAD: a branch git reads as HEAD or its own ref"),
    mutation(
        "branch-name-expanded", "apply", "executor/apply/branch.py",
        "    if said != branch:\n",
        "    if False:\n",
        [f"{BRANCH_NAMES}::test_a_name_git_reads_as_another_ref_is_refused[@{{-1}}]"],
        "--branch @{-1}: git expands it to the previous branch's name"),
    mutation(
        "permission-glob-literal-class", "permissions", "policies/permissions.py",
        "    return glob_regex(pattern, path=path).match(subject) is not None\n",
        '    return glob_regex(pattern.replace("[", "[[]"), path=path).match(subject) is not '
        "None\n",
        [f"{GLOBS}::test_a_class_in_a_deny_pattern_denies_the_read",
         "tests/executor/test_glob_rules.py::"
         "test_a_deny_with_a_class_denies_the_read_and_hides_the_path[host]",
         f"{GLOBS}::test_the_file_glob_and_the_permission_glob_agree_on_a_table[**/[a-z]*.env]"],
        "Read(secrets/[a-z]*.env) as a deny takes '[' literally and never matches: the "
        "child reads secrets/prod.env while find reads the class"),
    mutation(
        "permission-glob-unreadable-kept", "permissions", "policies/permissions.py",
        "        return None if value is None else check_glob(value)\n",
        "        return value\n",
        [f"{GLOBS}::test_an_unreadable_pattern_is_refused_everywhere[secrets/[a-z*.env]"],
        "a rule whose pattern corral cannot read is kept, and matches nothing"),
    mutation(
        "loader-glob-unreadable-kept", "permissions", "policies/loader/toolnames.py",
        "    problem = None if pattern is None else glob_problem(pattern)\n",
        "    problem = None\n",
        [f"{GLOBS}::test_a_rule_with_a_bad_class_is_refused_at_load_with_a_diagnostic"
         "[claude-deny]",
         f"{GLOBS}::test_a_rule_with_a_bad_class_is_refused_at_load_with_a_diagnostic"
         "[opencode-v1]"],
        "a definition with an unreadable pattern gets no diagnostic naming file and field"),
    mutation(
        "may-match-class", "shell patterns", "policies/permissions.py",
        "        return isinstance(b, CharClass) or b == _ONE or a.matches(b)\n",
        "        return False\n",
        [f"{GLOBS}::test_an_uncertain_word_meets_a_class_as_one_character"],
        "with Bash(git [p]ush *) denied, `git pu$()sh origin` passes: a class never meets "
        "the characters around an uncertain word"),
    mutation(
        "ledger-last-reads-its-record", "ledger index", "executor/ledger/lookup.py",
        "        if record is not None and record.parent_run is None \\\n"
        "                and record.started_at == found[1] and record.run_id == found[0]:\n",
        "        if record is not None:\n",
        ["tests/executor/test_ledger_index.py::test_the_index_is_rebuilt_exactly_after_delete_"
         "truncate_and_forgery"],
        "a forged index row (another run's start time) would make `show last` and `apply "
        "last` pick a run the user did not start last"),
    mutation(
        "ledger-delete-through-index", "ledger index", "executor/ledger/store.py",
        "    with indexed(ledger, run=run_id):\n"
        "        gone = staging_dir(ledger, f\"gone-{run_id}\")\n",
        "    if True:\n"
        "        gone = staging_dir(ledger, f\"gone-{run_id}\")\n",
        ["tests/executor/test_ledger_index.py::test_a_node_removes_the_run_it_handed_back_"
         "from_its_index_too",
         "tests/executor/test_ledger_index.py::test_every_mutation_leaves_the_rows_a_rebuild_"
         "makes"],
        "a run removed from a ledger (a node's copy, handed back) would keep its index row: "
        "listed, and picked by `last`, while no record is there"),
    mutation(
        "ledger-delete-refuses-fanouts", "ledger index", "executor/ledger/store.py",
        "    if run_id == FANOUTS:\n", "    if False:\n",
        ["tests/executor/test_ledger_index.py::test_every_mutation_leaves_the_rows_a_rebuild_"
         "makes"],
        "`delete_run(ledger, \"fanouts\")` would remove every fanout record of the ledger"),
    mutation(
        "ledger-crash-repair", "ledger index", "executor/ledger/index.py",
        "    dead = [m for m in markers if not m.alive]\n", "    dead: list[_Marker] = []\n",
        ["tests/executor/test_ledger_index.py::test_a_writer_killed_at_each_step_loses_"
         "nothing[after-record]"],
        "a run whose process died between its record and its index row would never be "
        "listed (nor picked by `last` or gc)"),
)


# -- running ----------------------------------------------------------------------------


@dataclass
class Outcome:
    """What running one mutant (or one baseline chunk) gave."""

    name: str
    status: str  # caught, flaky, survived, error, passed (baseline)
    seconds: float
    detail: str = ""
    output: str = field(default="", repr=False)
    #: caught: the pytest ids of the listed tests that failed (rerun on the clean copy).
    failed_ids: tuple[str, ...] = ()


def check_list(root: Path, mutations: Iterable[Mutation]) -> list[str]:
    """Problems of the list against the code: stale anchors, duplicates, broken mutants."""
    problems: list[str] = []
    seen: set[str] = set()
    for mut in mutations:
        if mut.name in seen:
            problems.append(f"{mut.name}: duplicate name")
        seen.add(mut.name)
        if not mut.tests:
            problems.append(f"{mut.name}: no catching tests")
        texts: dict[str, str] = {}
        for edit in mut.edits:
            path = root / edit.file
            if edit.file not in texts:
                if not path.is_file():
                    problems.append(f"{mut.name}: {edit.file} does not exist")
                    continue
                texts[edit.file] = path.read_text(encoding="utf-8")
            count = texts[edit.file].count(edit.anchor)
            if count != 1:
                problems.append(f"{mut.name}: anchor found {count} times in {edit.file} "
                                f"(must be exactly once): {edit.anchor!r}")
                continue
            texts[edit.file] = texts[edit.file].replace(edit.anchor, edit.replacement)
        for file, text in texts.items():
            if file.endswith(".py"):
                try:
                    compile(text, file, "exec")
                except SyntaxError as exc:
                    problems.append(f"{mut.name}: the mutant of {file} does not compile: {exc}")
    return problems


def source_files(root: Path) -> list[str]:
    """The files of the working tree git knows or would add (tracked + untracked, not ignored)."""
    done = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True)
    return [name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0")
            if name and (root / name).is_file()]


def make_copy(root: Path, files: list[str], target: Path) -> None:
    """A scratch copy of ``files`` (symlinks kept as symlinks)."""
    for name in files:
        source, dest = root / name, target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            dest.symlink_to(source.readlink())
        else:
            shutil.copy2(source, dest)


def copy_env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a cached .pyc of the mutant must never outlive it
    return env


def check_imports(python: str, copy: Path) -> None:
    """The copy's packages, not the editable install's, are the ones imported."""
    code = ("import executor, policies, sandbox; "
            "print('\\n'.join(m.__file__ for m in (executor, policies, sandbox)))")
    done = subprocess.run([python, "-c", code], cwd=copy, env=copy_env(copy),
                          capture_output=True, text=True, check=True)
    for path in done.stdout.split():
        if not Path(path).resolve().is_relative_to(copy.resolve()):
            raise SystemExit(f"the scratch copy imports {path}, not its own code")


@dataclass(frozen=True)
class PytestRun:
    """One pytest run: its exit code (``None``: killed at the timeout), its output, and the
    text of its ``--junitxml`` report (``None`` when it wrote none)."""

    code: int | None
    output: str
    junit: str | None = None


@dataclass(frozen=True)
class JunitCase:
    """One ``<testcase>`` of a junit report (pytest writes a second one, with the same name,
    for an error in teardown after a failure in the call)."""

    classname: str
    name: str
    #: ``<failure>``: the test itself failed (an assertion, an exception in its call, a strict
    #: xfail that passed).
    failed: bool = False
    #: ``<error>`` messages: an error in setup or teardown (a fixture), or in collection.
    errors: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


def junit_address(test_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's junit report gives the test ``test_id`` (its
    ``mangle_test_address``): ``tests/a/test_b.py::C::test_d[x]`` is
    (``tests.a.test_b.C``, ``test_d[x]``)."""
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def read_junit(text: str) -> list[JunitCase]:
    """The test cases of a junit report (``ValueError`` when it is not one)."""
    try:
        # S314: the report is our own pytest's, written into our scratch copy
        root = ElementTree.fromstring(text)  # noqa: S314
    except ElementTree.ParseError as exc:
        raise ValueError(f"not a junit report: {exc}") from exc
    cases = []
    for case in root.iter("testcase"):
        cases.append(JunitCase(
            classname=case.get("classname", ""), name=case.get("name", ""),
            failed=case.find("failure") is not None,
            errors=tuple(error.get("message", "error") for error in case.iter("error"))))
    return cases


def listed_in(test_id: str, case: JunitCase) -> bool:
    """Whether ``case`` is a test the id ``test_id`` selects: that very test (a parametrized
    id matches only itself, exactly), each parametrization of a bare function id, every test
    of a file id."""
    if "::" not in test_id:
        module = junit_address(f"{test_id}::x")[0]
        return case.classname == module or case.classname.startswith(f"{module}.")
    classname, name = junit_address(test_id)
    if case.classname != classname:
        return False
    return case.name == name or ("[" not in name and case.name.startswith(f"{name}["))


def run_pytest(python: str, copy: Path, tests: Sequence[str], timeout: float, *,
               first_failure: bool = True) -> PytestRun:
    """``pytest -x`` on ``tests`` inside ``copy`` (every test with ``first_failure``
    false), with a junit report."""
    basetemp = copy / ".mutant-tmp"
    report = copy / ".mutant-report.xml"
    report.unlink(missing_ok=True)
    stop = ["-x"] if first_failure else []
    argv = [python, "-m", "pytest", *stop, "-q", "-p", "no:cacheprovider", "-rfEs",
            f"--basetemp={basetemp}", f"--junitxml={report}", "-o", "junit_family=xunit2",
            "-o", "junit_logging=no", *tests]
    proc = subprocess.Popen(argv, cwd=copy, env=copy_env(copy), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        code = None
    try:
        junit: str | None = report.read_text(encoding="utf-8")
    except OSError:
        junit = None
    report.unlink(missing_ok=True)
    return PytestRun(code, output, junit)


def node_id(case: JunitCase, root: Path) -> str | None:
    """The pytest id of a junit case (the inverse of :func:`junit_address`): the longest
    dotted prefix of its classname that is a file under ``root`` is the module."""
    parts = case.classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[cut:], case.name])
    return None


def _summary(output: str) -> str:
    """The first failure line, else pytest's last line."""
    lines = [line for line in output.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            return line[:160]
    return lines[-1][:160] if lines else ""


def judge(mut: Mutation, run: PytestRun, seconds: float, root: Path | None = None) -> Outcome:
    """Caught, survived or error, from the junit report of the mutant's tests.

    Caught only when the report shows at least one of ``mut.tests`` *failed*: an assertion
    or an exception inside the test's call (a strict xfail that passed counts too). An
    error in the setup or teardown of a listed test (a fixture that broke), a collection
    error, a failed test that is not in the list, or a pytest exit 1 with no failed listed
    test (a crash in session cleanup) is never a catch: it is an error, with the reason.
    Survived: pytest passed (exit 0) and a listed test ran. A catch names the failed tests'
    pytest ids (under ``root``: else the listed ids that select them), for
    :func:`confirm_on_clean`.
    """
    last = _summary(run.output)

    def outcome(status: str, detail: str) -> Outcome:
        return Outcome(mut.name, status, seconds, detail, run.output)

    if run.code is None:
        return outcome("error", "timed out")
    if run.junit is None:
        return outcome("error", f"pytest exit {run.code} without a junit report: {last}")
    try:
        cases = read_junit(run.junit)
    except ValueError as exc:
        return outcome("error", f"pytest exit {run.code}: {exc}")
    listed = [case for case in cases if any(listed_in(t, case) for t in mut.tests)]
    failed = [case for case in listed if case.failed]
    if failed:
        ids = [node_id(case, root) if root is not None else None for case in failed]
        rerun = [found or next(t for t in mut.tests if listed_in(t, case))
                 for found, case in zip(ids, failed, strict=True)]
        return replace(outcome("caught", "failed: "
                               + ", ".join(dict.fromkeys(c.label for c in failed))),
                       failed_ids=tuple(dict.fromkeys(rerun)))
    errors = [case for case in cases if case.errors]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return outcome("error", f"error, not a failure, in {first.label}: "
                       f"{first.errors[0][:120]}{more}")
    strangers = [case for case in cases if case.failed]
    if strangers:
        return outcome("error", "only tests not in its list failed: "
                       + ", ".join(c.label for c in strangers))
    if run.code != 0:
        return outcome("error", f"pytest exit {run.code} with no listed test failed: {last}")
    if not listed:
        return outcome("error", f"none of its listed tests ran: {last}")
    skipped = " (its tests skipped)" if "skipped" in last else ""
    return outcome("survived", f"tests passed{skipped}: {last}")


def apply_edits(copy: Path, mut: Mutation) -> dict[Path, str]:
    """Write the mutant into ``copy``; return the original texts to restore."""
    originals: dict[Path, str] = {}
    for edit in mut.edits:
        path = copy / edit.file
        text = path.read_text(encoding="utf-8")
        originals.setdefault(path, text)
        path.write_text(text.replace(edit.anchor, edit.replacement, 1), encoding="utf-8")
    return originals


def confirm_on_clean(python: str, copy: Path, outcome: Outcome, timeout: float,
                     reruns: int) -> Outcome:
    """A catch holds only if the tests that failed on the mutant pass on the clean copy,
    ``reruns`` times: a test that fails there too, or only some of the times (a wall-clock
    deadline on a busy machine), caught nothing; the mutant is ``flaky`` and the run fails."""
    if outcome.status != "caught" or not outcome.failed_ids or reruns < 1:
        return outcome
    started = time.monotonic()
    for attempt in range(1, reruns + 1):
        run = run_pytest(python, copy, outcome.failed_ids, timeout)
        if run.code != 0:
            why = "timed out" if run.code is None else _summary(run.output)
            return replace(outcome, status="flaky",
                           seconds=outcome.seconds + time.monotonic() - started,
                           detail=f"{outcome.detail}; but on the clean copy (rerun {attempt} "
                           f"of {reruns}) too: {why}", output=outcome.output + run.output)
    return replace(outcome, seconds=outcome.seconds + time.monotonic() - started,
                   detail=f"{outcome.detail} (passed {reruns}x on the clean copy)")


def confirm_all_on_clean(python: str, copies: list[Path], outcomes: list[Outcome],
                         timeout: float, reruns: int) -> list[Outcome]:
    """:func:`confirm_on_clean` for a whole audit at once: every test that caught a mutant
    runs again on the clean copies, split across them, in one pytest run per copy and
    round (328 one-test runs cost as much again as the audit itself, measured); a mutant
    whose catching test fails there, in any round, is ``flaky``."""
    ids = sorted({test for o in outcomes if o.status == "caught" for test in o.failed_ids})
    if not ids or reruns < 1:
        return outcomes
    bad: dict[str, str] = {}  # test id -> why it is not a catch
    lock = threading.Lock()

    def one(copy: Path, chunk: list[str], attempt: int) -> None:
        run = run_pytest(python, copy, chunk, timeout, first_failure=False)
        try:
            cases = read_junit(run.junit) if run.junit else []
        except ValueError:
            cases = []
        failed = {node_id(case, copy) for case in cases if case.failed or case.errors}
        why = "timed out" if run.code is None else _summary(run.output)
        with lock:
            for test in chunk:
                if test in failed or run.code is None or (run.code != 0 and not cases):
                    bad.setdefault(test, f"rerun {attempt} of {reruns}: {why}")

    for attempt in range(1, reruns + 1):
        chunks = [ids[i::len(copies)] for i in range(len(copies))]
        threads = [threading.Thread(target=one, args=(copy, chunk, attempt))
                   for copy, chunk in zip(copies, chunks, strict=True) if chunk]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    confirmed = []
    for outcome in outcomes:
        flaky = ([test for test in outcome.failed_ids if test in bad]
                 if outcome.status == "caught" else [])
        if flaky:
            outcome = replace(outcome, status="flaky",  # noqa: PLW2901 - its confirmed form
                              detail=f"{outcome.detail}; but on the clean copy too: "
                              f"{flaky[0]} ({bad[flaky[0]]})")
        elif outcome.status == "caught":
            outcome = replace(outcome,  # noqa: PLW2901 - its confirmed form
                              detail=f"{outcome.detail} (passed {reruns}x on the clean copy)")
        confirmed.append(outcome)
    print(f"clean reruns: {len(ids)} catching test id(s) x{reruns}, {len(bad)} failed there",
          flush=True)
    return confirmed


def run_mutant(python: str, copy: Path, mut: Mutation, timeout: float,
               every_test: bool, reruns: int = 1) -> Outcome:
    """Apply ``mut`` to ``copy``, run its tests (together, or each alone), restore; then
    rerun the tests that caught it on the clean copy (:func:`confirm_on_clean`)."""
    originals = apply_edits(copy, mut)
    started = time.monotonic()
    try:
        if not every_test:
            first = judge(mut, run_pytest(python, copy, mut.tests, timeout),
                          time.monotonic() - started, copy)
        else:
            alone = [judge(replace(mut, tests=(test,)),
                           run_pytest(python, copy, [test], timeout), 0.0, copy)
                     for test in mut.tests]
    finally:
        for path, text in originals.items():
            path.write_text(text, encoding="utf-8")
    if not every_test:
        return confirm_on_clean(python, copy, first, timeout, reruns)
    seconds = time.monotonic() - started
    missed = [f"{test} {o.status}: {o.detail}" for test, o in zip(mut.tests, alone, strict=True)
              if o.status != "caught"]
    if not missed:
        caught = Outcome(mut.name, "caught", seconds, f"by each of {len(alone)} test id(s)",
                         failed_ids=tuple(dict.fromkeys(i for o in alone for i in o.failed_ids)))
        return confirm_on_clean(python, copy, caught, timeout, reruns)
    status = "error" if any(o.status == "error" for o in alone) else "survived"
    return Outcome(mut.name, status, seconds, "not caught by: " + "; ".join(missed),
                   "\n".join(o.output for o in alone))


def worker(python: str, copy: Path, jobs: queue.Queue[Mutation], results: list[Outcome],
           timeout: float, lock: threading.Lock, every_test: bool, reruns: int = 1) -> None:
    while True:
        try:
            mut = jobs.get_nowait()
        except queue.Empty:
            return
        outcome = run_mutant(python, copy, mut, timeout, every_test, reruns)
        with lock:
            results.append(outcome)
            print(f"  {outcome.status:<8} {outcome.seconds:6.1f}s  {mut.name}: {outcome.detail}",
                  flush=True)


def baseline(python: str, copies: list[Path], tests: list[str], timeout: float) -> list[Outcome]:
    """Every catching test on the unmutated copies, split across them; all must pass."""
    chunks = [tests[i::len(copies)] for i in range(len(copies))]
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        if not chunks[index]:
            return
        started = time.monotonic()
        run = run_pytest(python, copies[index], chunks[index], timeout)
        code, output = run.code, run.output
        status = "passed" if code == 0 else "error"
        detail = _summary(output)
        if code == 0 and "skipped" in detail:
            detail += "  (some catching tests skip here: their mutants may survive)"
        with lock:
            outcomes.append(Outcome(f"baseline {index + 1}/{len(copies)}", status,
                                    time.monotonic() - started, detail, output))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(copies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def print_table(outcomes: list[Outcome], by_name: dict[str, Mutation]) -> None:
    width = max(len(o.name) for o in outcomes)
    print(f"\n{'mutation':<{width}}  {'area':<13}  {'result':<8}  {'time':>6}  why / detail")
    for outcome in outcomes:
        mut = by_name[outcome.name]
        note = mut.why if outcome.status == "caught" else outcome.detail
        print(f"{outcome.name:<{width}}  {mut.area:<13}  {outcome.status:<8}  "
              f"{outcome.seconds:5.1f}s  {note}")


def select(names: str | None) -> list[Mutation]:
    if not names:
        return list(MUTATIONS)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    known = {mut.name: mut for mut in MUTATIONS}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit(f"unknown mutation(s): {', '.join(unknown)}; see --list")
    return [known[name] for name in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated mutation names")
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per pytest run (default 600)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unmutated run of the catching tests")
    parser.add_argument("--every-test", action="store_true",
                        help="run each catching test alone: every one must catch its mutant "
                        "(slower; checks the list, not only the defences)")
    parser.add_argument("--clean-reruns", type=int, default=1,
                        help="times the tests that caught a mutant rerun on the clean copy; "
                        "a failure there makes it flaky, not caught (default 1, 0: never)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter with corral's test dependencies")
    args = parser.parse_args(argv)
    chosen = select(args.only)
    if args.list:
        for mut in chosen:
            files = ", ".join(sorted({edit.file for edit in mut.edits}))
            print(f"{mut.name:<34} {mut.area:<13} {files}\n    {mut.why}\n    tests: "
                  + " ".join(mut.tests))
        print(f"{len(chosen)} mutations")
        return 0
    problems = check_list(REPO, MUTATIONS)
    if problems:
        print("the mutation list does not match the code:", *problems, sep="\n  ",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    jobs = max(1, min(args.jobs, len(chosen)))
    scratch = Path(tempfile.mkdtemp(prefix="corral-mutants-"))
    try:
        sources = source_files(REPO)
        copies = []
        for index in range(jobs):
            copy = scratch / f"copy{index}"
            make_copy(REPO, sources, copy)
            check_imports(args.python, copy)
            copies.append(copy)
        print(f"{len(chosen)} mutants, {jobs} worker(s), scratch {scratch}", flush=True)
        if not args.no_baseline:
            tests = sorted({test for mut in chosen for test in mut.tests})
            print(f"baseline: {len(tests)} catching test ids, unmutated", flush=True)
            base = baseline(args.python, copies, tests, args.timeout)
            for outcome in base:
                print(f"  {outcome.status:<8} {outcome.seconds:6.1f}s  {outcome.name}: "
                      f"{outcome.detail}", flush=True)
            broken = [o for o in base if o.status != "passed"]
            if broken:
                for outcome in broken:
                    print(outcome.output[-4000:], file=sys.stderr)
                print("the baseline fails: no mutant can be judged", file=sys.stderr)
                return 1
        queue_: queue.Queue[Mutation] = queue.Queue()
        for mut in chosen:
            queue_.put(mut)
        results: list[Outcome] = []
        lock = threading.Lock()
        print("mutants:", flush=True)
        # Each mutant's catch is confirmed on the clean copies at the end, all at once
        # (:func:`confirm_all_on_clean`); --every-test confirms each mutant as it goes.
        per_mutant = args.clean_reruns if args.every_test else 0
        threads = [threading.Thread(target=worker, args=(args.python, copy, queue_, results,
                                                         args.timeout, lock, args.every_test,
                                                         per_mutant))
                   for copy in copies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if not args.every_test:
            results = confirm_all_on_clean(args.python, copies, results, args.timeout,
                                           args.clean_reruns)
        order = {mut.name: index for index, mut in enumerate(chosen)}
        results.sort(key=lambda o: order[o.name])
        print_table(results, {mut.name: mut for mut in chosen})
        bad = [o for o in results if o.status != "caught"]
        for outcome in bad:
            print(f"\n--- {outcome.name}: {outcome.status}\n{outcome.output[-3000:]}",
                  file=sys.stderr)
        counts = {status: sum(o.status == status for o in results)
                  for status in ("caught", "flaky", "survived", "error")}
        print(f"\n{counts['caught']} caught, {counts['flaky']} flaky, {counts['survived']} "
              f"survived, {counts['error']} errors, of {len(results)} mutants in "
              f"{time.monotonic() - started:.0f}s")
        return 1 if bad else 0
    finally:
        if args.keep:
            print(f"scratch copies kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

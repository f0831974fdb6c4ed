"""Benchmark: dispatch overhead per tool call against calling the tool directly.

Dispatch adds, per call: the exact-name check against the capability, argument
validation (pydantic), the permission layers for every subject, approval
bookkeeping and the audit record. Measured two ways, in the same run:

* a no-op tool (the pure overhead: what dispatch costs on its own);
* ``read_file`` of a small file in a real sandbox workspace (what a cheap
  real call costs with and without dispatch).

    python scripts/bench_dispatch.py [--calls 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from executor.models.base import ToolCall
from executor.tools import ToolContext, native_tools
from executor.tools.dispatch import Dispatcher, ToolOutput
from policies.capability import Capability
from policies.contract import SandboxMode
from policies.permissions import Action, PermissionPolicy, PermissionRule
from sandbox.config import HostConfig
from sandbox.factory import open_sandbox


class NoArgs(BaseModel):
    path: str


class Noop:
    name = "read_file"
    description = "no-op"
    args = NoArgs

    def subjects(self, args: NoArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: NoArgs, context: Any) -> ToolOutput:
        return ToolOutput("ok")


POLICY = PermissionPolicy(rules=(  # a realistic layer: a few path and command rules
    PermissionRule(tool="write_file", pattern="**/*.env*", action=Action.DENY),
    PermissionRule(tool="read_file", pattern="secrets/**", action=Action.DENY),
    PermissionRule(tool="shell", pattern="rm *", action=Action.DENY),
))


def per_call(func: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        func()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    capability = Capability.root(policy=POLICY)
    noop = Noop()
    direct = per_call(lambda: noop.run(NoArgs(path="src/a.py"), None), args.calls)
    dispatcher = Dispatcher(agent="bench", capability=capability, tools={"read_file": noop},
                            context=None)
    call = ToolCall(id="c", name="read_file", arguments={"path": "src/a.py"})
    dispatched = per_call(lambda: dispatcher.dispatch(call), args.calls)

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "src").mkdir(parents=True)
        (repo / "src" / "a.py").write_text("print('hello')\n" * 50)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        sandbox = open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.READ_ONLY,
                               state_root=Path(tmp) / "state")
        try:
            context = ToolContext(sandbox=sandbox, agent="bench")
            tool = native_tools()["read_file"]
            real_args = tool.args(path="src/a.py")
            real_direct = per_call(lambda: tool.run(real_args, context), args.calls // 4)
            real = Dispatcher(agent="bench", capability=capability, tools={"read_file": tool},
                              context=context)
            real_dispatched = per_call(lambda: real.dispatch(call), args.calls // 4)
        finally:
            sandbox.teardown(discard=True)
    result = {
        "calls": args.calls,
        "noop_direct_us": round(direct, 2), "noop_dispatched_us": round(dispatched, 2),
        "overhead_us": round(dispatched - direct, 2),
        "read_file_direct_us": round(real_direct, 2),
        "read_file_dispatched_us": round(real_dispatched, 2),
        "read_file_ratio": round(real_dispatched / real_direct, 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"no-op tool     direct {direct:8.2f} us   dispatched {dispatched:8.2f} us   "
          f"overhead {dispatched - direct:7.2f} us/call")
    print(f"read_file      direct {real_direct:8.2f} us   dispatched {real_dispatched:8.2f} us   "
          f"ratio {real_dispatched / real_direct:5.2f}x")


if __name__ == "__main__":
    main()

"""A client of corral's Python API, as a user would write it: checked with mypy --strict."""

from __future__ import annotations

import asyncio
import json
import sys

from executor import (
    AsyncCorral,
    CancelToken,
    Corral,
    CorralError,
    ProgressEvent,
    Replay,
    RunResult,
)


def main(root: str) -> dict[str, object]:
    corral = Corral(root, config_file="examples/agents.json", backend="bubblewrap")
    names: list[str] = corral.agents().names
    contract: dict[str, object] = corral.agent("patcher").to_json()
    try:
        corral.agent("patchr")
    except CorralError as exc:
        unknown = {"code": exc.code, "hint": exc.hint or "", "exit_code": exc.exit_code}
    events: list[ProgressEvent] = []
    replay = Replay.from_file("examples/replays/patch.yaml")
    result: RunResult = corral.run("Add a changelog", agent="patcher", script=replay,
                                   progress=events.append)
    listed = [run.run_id for run in corral.runs().runs]
    same = corral.diff(result.run_id).text == result.diff

    async def in_a_loop() -> RunResult:
        seen: list[str] = []

        async def progress(event: ProgressEvent) -> None:
            seen.append(event.kind)

        run = await AsyncCorral(corral).run("Add a changelog", agent="patcher",
                                            script=replay, progress=progress,
                                            cancel=CancelToken())
        assert seen, "the loop saw the run's events"
        return run

    awaited = asyncio.run(in_a_loop())
    return {"names": names, "contract_name": contract.get("name"), "unknown": unknown,
            "status": result.status.value, "exit_code": result.exit_code,
            "files": [f["path"] for f in result.changed_files], "events": len(events),
            "listed": result.run_id in listed, "same_diff": same,
            "async_status": awaited.status.value, "async_diff": awaited.diff == result.diff}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))

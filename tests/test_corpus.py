"""Every corpus file loads or is rejected with a diagnostic naming file, field and reason.

The outcome of each file is pinned twice. A syrupy snapshot holds the whole
outcome, so a change in behaviour shows up in review (``pytest
--snapshot-update`` rewrites it). Because that flag rewrites the snapshot
wholesale, what each file *grants* (status, tools, denied tools, delegates,
mode, sandbox, permission rules, the fields that rejected it) is also pinned in
``tests/corpus_authority.tsv``, a file edited only by hand, line by line. Set
``CORRAL_CORPUS`` to check another corpus of the same layout: then the
crash-and-diagnostic checks run, and the pins are compared only for the
bundled corpus.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from policies.contract import AgentContract
from policies.loader import FileOutcome, Severity, Status
from policies.loader.corpus import load_corpus

BUNDLED = Path(__file__).parent / "corpus"
CORPUS = Path(os.environ.get("CORRAL_CORPUS", BUNDLED))


def _agent(contract: AgentContract) -> dict[str, Any]:
    route = contract.model
    return {
        "name": contract.name,
        "display_name": contract.display_name,
        "mode": contract.mode.value,
        "sandbox": contract.sandbox.value if contract.sandbox else None,
        "tools": sorted(contract.tools) if contract.tools is not None else None,
        "denied_tools": sorted(contract.denied_tools),
        "delegates": sorted(contract.delegates) if contract.delegates is not None else None,
        "rules": [f"{r.action.value} {r.tool} {r.pattern or '*'}"
                  for r in contract.permission.rules],
        "permission_mode": contract.permission.mode.value,
        "model": [str(c) for c in route.candidates] or (
            f"foreign:{route.foreign}" if route.foreign else "inherit"),
        "steps": contract.steps,
        "reachable": [contract.user_invocable, contract.subagent_available],
        "extras": sorted(contract.extras),
        "instructions_chars": len(contract.instructions),
    }


def _summary(outcome: FileOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status.value,
        "agents": [_agent(a) for a in outcome.agents],
        "diagnostics": [f"{d.severity.value} {d.line} {d.field}: {d.reason}"
                        for d in outcome.diagnostics],
    }


@pytest.fixture(scope="module")
def outcomes() -> dict[str, FileOutcome]:
    if not (CORPUS / "SOURCES.tsv").exists():
        pytest.fail(f"no corpus at {CORPUS} (SOURCES.tsv missing)")
    return {row.saved_file: outcome for row, outcome in load_corpus(CORPUS)}


def test_every_file_has_an_outcome_and_none_crashes(outcomes: dict[str, FileOutcome]) -> None:
    """No file crashes the loader: an internal error would be a diagnostic with code internal."""
    assert outcomes
    internal = [d.render() for o in outcomes.values() for d in o.diagnostics
                if d.code == "internal"]
    assert internal == []


def test_every_rejection_names_file_field_and_reason(outcomes: dict[str, FileOutcome]) -> None:
    for saved, outcome in outcomes.items():
        if outcome.status is Status.REJECTED:
            errors = [d for d in outcome.diagnostics if d.severity is Severity.ERROR]
            assert errors, saved
            for d in errors:
                assert d.file == outcome.display and d.field and d.reason and d.line >= 1
        if outcome.status is Status.SKIPPED:
            assert outcome.diagnostics, f"{saved} skipped without saying why"


def test_loaded_files_yield_agents_with_descriptions_of_their_file(
    outcomes: dict[str, FileOutcome],
) -> None:
    for outcome in outcomes.values():
        if outcome.status is Status.LOADED:
            assert outcome.agents
            for agent in outcome.agents:
                assert agent.origin.source == outcome.display


@pytest.mark.skipif(CORPUS != BUNDLED, reason="snapshot pins the bundled corpus only")
def test_corpus_outcomes_snapshot(outcomes: dict[str, FileOutcome],
                                  snapshot: SnapshotAssertion) -> None:
    """The pinned outcome of every bundled corpus file (status, contract, diagnostics)."""
    summary = {saved: _summary(outcome) for saved, outcome in sorted(outcomes.items())}
    assert summary == snapshot(extension_class=JSONSnapshotExtension)


@pytest.mark.skipif(CORPUS != BUNDLED, reason="counts pin the bundled corpus only")
def test_corpus_counts(outcomes: dict[str, FileOutcome]) -> None:
    """A coarse pin that reads well in a failure: how many files end in each status."""
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome.status.value] = counts.get(outcome.status.value, 0) + 1
    assert counts == {"loaded": 196, "rejected": 74, "skipped": 16}


AUTHORITY_PINS = Path(__file__).parent / "corpus_authority.tsv"


def _authority(agent: AgentContract) -> str:
    rules = ";".join(f"{r.action.value} {r.tool} {r.pattern or '*'}"
                     for r in agent.permission.rules)
    return " | ".join([
        agent.name, agent.mode.value, agent.sandbox.value if agent.sandbox else "-",
        ",".join(sorted(agent.tools)) if agent.tools is not None else "inherit",
        ",".join(sorted(agent.denied_tools)) or "-",
        ",".join(sorted(agent.delegates)) if agent.delegates is not None else "any",
        agent.permission.mode.value, rules or "-",
    ])


def _pin_line(saved: str, outcome: FileOutcome) -> str:
    errors = sorted({f"{d.field}:{d.code}" for d in outcome.diagnostics
                     if d.severity is Severity.ERROR})
    agents = " || ".join(_authority(agent) for agent in outcome.agents)
    return "\t".join([saved, outcome.status.value, agents or "-", " ".join(errors) or "-"])


@pytest.mark.skipif(CORPUS != BUNDLED, reason="the pins hold for the bundled corpus only")
def test_corpus_authority_pins(outcomes: dict[str, FileOutcome]) -> None:
    """Every file's status and granted authority equal its hand-kept line; a new or lost
    file is a difference too. No flag rewrites the pins."""
    expected = {line.split("\t", 1)[0]: line
                for line in AUTHORITY_PINS.read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#")}
    actual = {saved: _pin_line(saved, outcome) for saved, outcome in outcomes.items()}
    changed = [f"- {expected.get(saved, f'{saved} (not pinned)')}\n"
               f"+ {actual.get(saved, f'{saved} (gone from the corpus)')}"
               for saved in sorted(expected.keys() | actual.keys())
               if expected.get(saved) != actual.get(saved)]
    assert not changed, (f"{len(changed)} corpus outcome(s) differ from {AUTHORITY_PINS.name} "
                         "(edit the pinned lines if the change is intended):\n"
                         + "\n".join(changed))

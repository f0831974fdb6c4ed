"""One table of the places corral reads from a project (threats row 44): project discovery
iterates it, and the review flags of a child's diff are derived from it, so a place the
loader learns is flagged before anyone adds a review rule by hand."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from policies.contract import AgentFormat
from policies.environment import DEVCONTAINER, PROJECT_FILE
from policies.loader.discovery import WORKSPACE_ORDER, project_candidates
from policies.places import CORRAL, DISCOVERED, LAYOUTS, PROJECT_PLACES, ProjectPlace
from sandbox.names import REVIEW_RULES, review_flags

AGENT_MD = "---\nname: {0}\ndescription: d\n---\nDo it.\n"


def _samples(place: ProjectPlace) -> list[str]:
    """Paths a child's diff may add at this place: the place itself (a file) or files in it
    and below it (a directory), at the top and in a nested package (a root given to corral
    may be any directory of the repository; zuno reads nested layers itself)."""
    if place.kind == "file":
        paths = [place.path]
    else:
        paths = [f"{place.path}/x.md", f"{place.path}/sub/y.json", f"{place.path}/a/agent.md",
                 f"{place.path}/zuno.json", f"{place.path}/config.toml"]
    return paths + [f"pkg/sub/{path}" for path in paths]


def _flag(place: ProjectPlace) -> str:
    return "corral_config" if place.format == CORRAL else "agent_config"


@pytest.mark.parametrize("place", PROJECT_PLACES, ids=lambda p: f"{p.format}:{p.path}")
def test_every_project_place_is_flagged_for_review(place: ProjectPlace) -> None:
    for path in _samples(place):
        for spelled in (path, path.upper()):
            assert _flag(place) in review_flags(spelled, old_mode=None, new_mode="100644"), (
                spelled)


def test_the_first_review_rules_are_the_places() -> None:
    """The derived rows name every place, and nothing a place does not (docs/security.md lists
    them, a test holds that list equal to REVIEW_RULES)."""
    agents, corral = REVIEW_RULES[0], REVIEW_RULES[1]
    assert agents.flag == "agent_config" and corral.flag == "corral_config"
    assert set(agents.patterns) == {p.path + ("/" if p.kind == "dir" else "")
                                    for p in PROJECT_PLACES if p.format != CORRAL}
    assert ".corral/" in corral.patterns and DEVCONTAINER in corral.patterns


def test_the_table_is_well_formed() -> None:
    formats = {fmt.value for fmt in AgentFormat}
    for place in PROJECT_PLACES:
        assert place.format in formats | {CORRAL}, place
        assert place.layout in LAYOUTS, place
        assert not place.path.startswith("/") and ".." not in place.path.split("/"), place
        assert (place.kind == "file") is (place.layout in {"agent_map", "ngn_json",
                                                           "environment"}), place
    # every format has its project places; corral's are its environment's files
    assert {p.format for p in PROJECT_PLACES if p.layout in DISCOVERED} == set(WORKSPACE_ORDER)
    assert [p.path for p in PROJECT_PLACES if p.format == CORRAL] == [PROJECT_FILE, DEVCONTAINER]
    assert ProjectPlace("ngn", ".ngn/config.json", "file", "ngn_json") in PROJECT_PLACES


def test_project_discovery_reads_its_places_from_the_table_only() -> None:
    """No path is spelled in project_candidates: a place added to discovery is a row of the
    table, hence flagged (the test above), or this fails."""
    source = textwrap.dedent(inspect.getsource(project_candidates))
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.FunctionDef)
    statements = body.body[1:] if ast.get_docstring(body) else body.body
    strings = {node.value for statement in statements for node in ast.walk(statement)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert strings <= set(LAYOUTS), strings - set(LAYOUTS)


def _populate(root: Path) -> dict[str, str]:
    """One definition at every discovered place (nested zuno layer included); relative path
    -> the place's path."""
    made: dict[str, str] = {}

    def write(relative: str, text: str, place: ProjectPlace) -> None:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
        made[relative] = place.path

    for place in PROJECT_PLACES:
        name = place.format
        if place.layout in {"flat", "recursive", "nested"}:
            suffix = {"codex": ".toml", "catalog": ".json"}.get(place.format, ".md")
            write(f"{place.path}/{name}-{place.path.count('/')}{suffix}", AGENT_MD.format(name),
                  place)
        elif place.layout == "agent_map":
            write(place.path, '{"agent": {}}\n', place)
        elif place.layout == "codex_layer":
            write(f"{place.path}/config.toml", 'model = "o3"\n', place)
        elif place.layout == "zuno_layer":
            for layer in (place.path, f"pkg/{place.path}"):
                write(f"{layer}/zuno.json", '{"agents": {}}\n', place)
                write(f"{layer}/agents/z.md", AGENT_MD.format("z"), place)
    (root / "docs").mkdir()
    (root / "docs" / "agents.md").write_text(AGENT_MD.format("not-an-agent"))
    return made


def test_discovery_finds_a_definition_at_every_place_and_each_is_flagged(
        tmp_path: Path) -> None:
    made = _populate(tmp_path)
    found, _ = project_candidates(tmp_path)
    shown = [candidate.display for candidate in found]
    assert set(shown) == set(made), set(shown) ^ set(made)
    for path in shown:
        assert "agent_config" in review_flags(path, old_mode=None, new_mode="100644"), path
    # in workspace precedence order, format by format, as the table lists each format's places
    order = [next(p.format for p in PROJECT_PLACES if p.path == made[path]
                  and p.layout in DISCOVERED) for path in shown]
    ranks = [WORKSPACE_ORDER.index(AgentFormat(fmt)) for fmt in order]
    assert ranks == sorted(ranks)

"""``requiredSkills``: resolved before a child starts, or the child does not start.

A skill is a directory ``<name>/SKILL.md`` in one of the skill locations
(personal ones always; project ones only for a trusted project). Each
required name must resolve to exactly one source: a missing or ambiguous name
fails the child's start rather than silently skipping the requirement (the
zuno spec). A skill adds instructions to the system prompt; it never grants a
tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from executor.errors import RunError
from policies.loader import Environment
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import decode_text, read_bounded

__all__ = ["Skill", "resolve_skills", "skill_dirs"]

_PROJECT = (".claude/skills", ".agents/skills", ".github/skills", ".opencode/skill",
            ".opencode/skills", ".zuno/skills", ".ngn/skills")


@dataclass(frozen=True)
class Skill:
    """One resolved skill."""

    name: str
    path: Path
    instructions: str


def skill_dirs(root: Path, env: Environment, *, trust_project: bool) -> list[Path]:
    """Every directory skills are looked up in, personal first."""
    personal = [env.home / ".claude/skills", env.xdg_config / "ngn/skills",
                env.xdg_config / "zuno/skills", env.xdg_config / "opencode/skills"]
    project = [root / rel for rel in _PROJECT] if trust_project else []
    return personal + project


def _body(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end >= 0:
            return text[text.find("\n", end + 1) + 1:].strip()
    return text.strip()


def resolve_skills(names: tuple[str, ...], *, root: Path, env: Environment,
                   trust_project: bool) -> list[Skill]:
    """Resolve every name to exactly one ``SKILL.md``, or raise RunError."""
    dirs = skill_dirs(root, env, trust_project=trust_project)
    skills: list[Skill] = []
    for name in names:
        found = [d / name / "SKILL.md" for d in dirs if (d / name / "SKILL.md").exists()]
        if not found:
            raise RunError(f"required skill {name!r} was not found", code="missing_skill",
                           context={"looked in": ", ".join(str(d) for d in dirs)},
                           hint=f"create <skills dir>/{name}/SKILL.md, or remove it from "
                           "requiredSkills")
        if len(found) > 1:
            raise RunError(f"required skill {name!r} is ambiguous", code="ambiguous_skill",
                           context={"sources": ", ".join(str(p) for p in found)},
                           hint="keep exactly one skill of that name")
        try:
            text = decode_text(read_bounded(found[0]))
        except DefinitionRejected as exc:
            raise RunError(f"required skill {name!r} cannot be read: {exc.reason}",
                           code="missing_skill", context={"path": str(found[0])}) from exc
        skills.append(Skill(name=name, path=found[0], instructions=_body(text)))
    return skills

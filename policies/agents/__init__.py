"""The agents corral ships (pi's ``<package>/agents/*.md``, "bundled with pi-subagent").

pi-format Markdown files beside this module, package data of the wheel. Discovery reads
them first, so any personal, project or imported definition of the same name replaces
one (:func:`policies.loader.discover`); ``bundled=False`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED_DIR"]

#: The directory of the bundled definitions.
BUNDLED_DIR = Path(__file__).resolve().parent

"""``agents check --watch``: re-check on every change of a definition file (watchdog)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from policies.loader import Environment
from policies.loader.discovery import project_zuno_dirs

__all__ = ["watch_definitions"]

#: Top-level directories (relative to a root or HOME) that hold definitions.
_PROJECT_DIRS = (".agents", ".claude", ".github", ".opencode", ".codex", ".cursor", ".gemini",
                 ".pi", ".zuno", ".ngn", "initial-data")
_ROOT_FILES = ("opencode.json", "opencode.jsonc")
_DEBOUNCE_SECONDS = 0.2


class _Trigger(FileSystemEventHandler):
    def __init__(self, changed: threading.Event, root: Path) -> None:
        self.changed = changed
        self.root = root

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in {"opened", "closed_no_write"}:
            return
        path = Path(str(event.src_path))
        if path.parent == self.root and path.name not in _PROJECT_DIRS + _ROOT_FILES:
            return  # unrelated files at the root (the watch there is not recursive)
        self.changed.set()


def watch_definitions(root: Path, env: Environment, check: Callable[[], Any], *,
                      personal: bool = True, stop: threading.Event | None = None) -> None:
    """Run ``check`` now and after every change, until interrupted (or ``stop`` is set)."""
    root = root.resolve()
    changed = threading.Event()
    stop = stop or threading.Event()
    observer = Observer()
    observer.schedule(_Trigger(changed, root), str(root), recursive=False)
    bases = [root / name for name in _PROJECT_DIRS]
    bases += [path for path in project_zuno_dirs(root) if path.parent != root]  # nested layers
    if personal:
        bases += [env.home / name for name in (".claude", ".copilot", ".codex", ".cursor",
                                              ".gemini", ".pi")]
        bases += [env.xdg_config / name for name in ("ngn", "opencode", "zuno")]
    for base in bases:
        if base.is_dir() and not base.is_symlink():
            observer.schedule(_Trigger(changed, root), str(base), recursive=True)
    observer.start()
    try:
        check()
        while not stop.is_set():
            if not changed.wait(timeout=0.5):
                continue
            # Let a burst of events (an editor's save) settle before re-checking.
            while changed.wait(timeout=_DEBOUNCE_SECONDS):
                changed.clear()
            check()
    except KeyboardInterrupt:
        pass
    finally:
        observer.stop()
        observer.join()

"""Lazy entry points with side effects: importing memlib reads no environment variable,
creates no folder and builds no client; ``default_runtime()`` and ``runtime_client()`` do."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import RecallEngine
from .errors import RemoteMemoryError
from .records import user_scope_for
from .stores import open_store
from .stores._base import MemoryStore


class MissingConfigurationError(RemoteMemoryError):
    """An environment variable the online path needs is not set."""


def default_root() -> Path:
    home = os.environ.get("WORKBUDDY_HOME")
    base = Path(home).expanduser() if home else Path("~/.learn_workbuddy").expanduser()
    return base / "remote-memory"


def scope_path(root: str | Path, user_id: str) -> Path:
    """``<root>/users/<scope>/records.jsonl``: where a user's JSONL records live."""
    return Path(root) / "users" / user_scope_for(user_id) / "records.jsonl"


def default_user_id() -> str:
    return os.environ.get("WORKBUDDY_USER_ID") or "local-user"


def default_project() -> str | None:
    """``$MEMLIB_PROJECT`` when set and not empty, else None (no project)."""
    return os.environ.get("MEMLIB_PROJECT") or None


def default_store_url(user_id: str | None = None) -> str:
    """``$MEMLIB_STORE`` when set, else the JSONL file of the user's scope."""
    return os.environ.get("MEMLIB_STORE") or (
        f"jsonl:{scope_path(default_root(), user_id or default_user_id())}"
    )


@dataclass(frozen=True)
class Runtime:
    store: MemoryStore
    engine: RecallEngine
    user_id: str


_lock = threading.Lock()
_runtime: Runtime | None = None


def default_runtime() -> Runtime:
    """The process-wide store and engine, built from the environment on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            user_id = default_user_id()
            store = open_store(
                default_store_url(user_id), user_id=user_id, project=default_project()
            )
            # $MEMLIB_MIN_SCORE: a number or "suggested" (docs/abstention.md).
            floor = os.environ.get("MEMLIB_MIN_SCORE") or None
            _runtime = Runtime(
                store=store, engine=RecallEngine(store, min_score=floor), user_id=user_id
            )
        return _runtime


def reset_default_runtime() -> None:
    """Forget the cached runtime (tests, or after changing the environment)."""
    global _runtime
    with _lock:
        if _runtime is not None:
            _runtime.store.close()
        _runtime = None


def runtime_client(**client_options: Any) -> Any:
    """An ``anthropic.Anthropic`` client, checked and built only at the online boundary."""
    missing = [name for name in ("MODEL_ID", "ANTHROPIC_API_KEY") if not os.environ.get(name)]
    if missing:
        raise MissingConfigurationError(
            f"set {' and '.join(missing)} to talk to a live model "
            "(or run the offline scripted model: memlib chat --scripted)"
        )
    try:
        import anthropic
    except ImportError:
        raise MissingConfigurationError(
            "the anthropic package is not installed: pip install 'memlib[agent]'"
        ) from None
    return anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"], **client_options)

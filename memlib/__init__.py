"""memlib — remote memory for LLM agents, implemented for real and taught stage by stage.

normalize → candidate → score → stable rank → render. Importing this package loads
the standard library only: no store is opened, no file created, no client built."""

from __future__ import annotations

from ._runtime import default_runtime, runtime_client
from .candidates import RecallCandidate, build_recall_candidates
from .engine import RecallEngine
from .errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStorageError,
    RemoteMemoryUnsafePathError,
    RemoteMemoryValidationError,
    RemoteMemoryVectorModelError,
)
from .normalize import RecallQuery, normalize_recall_query
from .rank import stable_rank_recall_candidates
from .records import MemoryKind, MemorySource, StoredMemory, user_scope_for
from .render import render_recall_context, render_remote_profile
from .result import RecallHit, RecallResult, RecallScope
from .score import RecallScoreBreakdown, score_recall_candidate
from .stores import MemoryStore, RemoteMemoryStore, open_store

__version__ = "0.2.0"

__all__ = [
    "MemoryKind",
    "MemorySource",
    "StoredMemory",
    "MemoryStore",
    "RemoteMemoryStore",
    "open_store",
    "RecallEngine",
    "RecallQuery",
    "RecallCandidate",
    "RecallScoreBreakdown",
    "RecallHit",
    "RecallResult",
    "RecallScope",
    "normalize_recall_query",
    "build_recall_candidates",
    "score_recall_candidate",
    "stable_rank_recall_candidates",
    "render_recall_context",
    "render_remote_profile",
    "user_scope_for",
    "default_runtime",
    "runtime_client",
    "RemoteMemoryError",
    "RemoteMemoryValidationError",
    "RemoteMemoryDuplicateError",
    "RemoteMemoryScopeError",
    "RemoteMemoryCorruptionError",
    "RemoteMemoryUnsafePathError",
    "RemoteMemoryStorageError",
    "RemoteMemoryVectorModelError",
]

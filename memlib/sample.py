"""The sample corpus that the tests, ``memlib demo`` and every notebook share.

Fixed timestamps in August 2026 and a fixed store clock make every recall over it
reproducible to the last digit. Some records are there to teach one thing each:
003 is the chapter's worked example (both terms, one day old → 0.995161); 005 and 006
tie on every score so only ``memory_id`` orders them; 009 is old, to show recency
decay; 002, 007, 010 and 011 are Chinese, mixed and Japanese; 008 has accents and ß.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .records import MemoryKind, MemorySource, StoredMemory
from .runtime import scope_path
from .stores.base import MemoryStore
from .stores.jsonl import RemoteMemoryStore

__all__ = [
    "SAMPLE_USER_ID",
    "SAMPLE_AS_OF",
    "SAMPLE_STORED_AT",
    "SAMPLE_QUERY",
    "sample_records",
    "load_sample_corpus",
    "open_sample_store",
    "fixed_clock",
    "scope_path",
]

SAMPLE_USER_ID = "alice"
SAMPLE_AS_OF = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
SAMPLE_STORED_AT = datetime(2026, 8, 10, 8, 0, tzinfo=UTC)
SAMPLE_QUERY = "layered memory"

C, P = MemoryKind.CONVERSATION, MemoryKind.PROFILE

# (kind, memory_id, captured_at, title, summary, content)
_ROWS: tuple[tuple[MemoryKind, str, str, str, str, str], ...] = (
    (C, "conversation-001", "2026-08-01T12:00:00Z", "Persistence decision",
     "Selected SQLite WAL.",
     "Selected SQLite WAL for local persistence; the JSONL store stays the teaching default."),
    (C, "conversation-002", "2026-08-03T09:30:00Z", "分层记忆设计",
     "讨论分层记忆的边界。",
     "我们讨论了分层记忆:工作区记忆、用户记忆和远程记忆各自有 owner 和来源。"),
    (C, "conversation-003", "2026-08-09T12:00:00Z", "layered memory design",
     "Separated workspace, user and remote memory boundaries.",
     "Agreed on a layered memory design: workspace memory, user memory and remote memory "
     "keep separate owners and sources."),
    (C, "conversation-004", "2026-08-07T15:00:00Z", "Recall tool contract",
     "recall_history queries must restate the topic.",
     "The recall service cannot see the current chat, so the model must restate the topic "
     "in every recall_history query; 'continue last time' is not a query."),
    (C, "conversation-005", "2026-08-05T08:00:00Z", "Ranking ties (A)",
     "Deferred the embedding reranker.",
     "Deferred the embedding reranker until the recall contract is stable."),
    (C, "conversation-006", "2026-08-05T08:00:00Z", "Ranking ties (B)",
     "Deferred the embedding reranker as well.",
     "Also deferred the embedding reranker; hybrid retrieval can wait."),
    (C, "conversation-007", "2026-08-06T10:00:00Z", "大阪出差",
     "大阪出差的酒店偏好。",
     "用户去大阪出差时偏好靠近车站的酒店,预算每晚一万五千日元。"),
    (C, "conversation-008", "2026-07-28T18:00:00Z", "Course planning at Café Lumière",
     "Planned the memory course at Café Lumière.",
     "The team met at Café Lumière on Torstraße in Berlin to plan the remote memory course."),
    (C, "conversation-009", "2026-06-15T09:00:00Z", "Retention policy",
     "Kept conversation memory for one year.",
     "Decided that conversation memory is retained for one year before review; profiles are "
     "kept until a newer snapshot replaces them."),
    (C, "conversation-010", "2026-08-08T11:00:00Z", "LoCoMo evaluation",
     "llm记忆 evaluation on LoCoMo.",
     "Measured llm记忆 recall on the LoCoMo benchmark: the baseline finds about 42% of the "
     "evidence turns in its top 10."),
    (C, "conversation-011", "2026-08-04T13:00:00Z", "メモリ設計レビュー",
     "メモリ設計のレビュー。",
     "リモートメモリ設計のレビューを行い、プロファイルと会話記録を分けることにした。"),
    (C, "conversation-012", "2026-08-02T16:45:00Z", "Append-only store",
     "JSONL appends hold a lock and fsync.",
     "Each append takes the advisory lock, writes one whole line with O_APPEND and calls "
     "fsync before it is acknowledged."),
    (C, "conversation-013", "2026-07-10T10:15:00Z", "Prompt budget",
     "Rendered context must fit the prompt budget.",
     "Recalled context is rendered as XML with provenance and must fit a 4,000-character "
     "prompt budget; an empty result renders nothing."),
    (P, "profile-001", "2026-07-20T08:00:00Z", "Profile snapshot, July",
     "Backend engineer; concise answers.",
     "Alice is a backend engineer who prefers concise answers with code examples in Python."),
    (P, "profile-002", "2026-08-08T08:00:00Z", "Profile snapshot, August",
     "Backend engineer building a memory course; bilingual.",
     "Alice is a backend engineer building an agent memory course. She prefers concise "
     "answers with runnable code. 偏好中英文双语解释。 "
     "Based in Berlin; travels to Osaka for work."),
)


def sample_records() -> tuple[dict[str, Any], ...]:
    """The corpus as ``append_many`` items, in a fixed order."""
    items = []
    for kind, memory_id, captured_at, title, summary, content in _ROWS:
        prefix = "transcript" if kind is C else "profile-snapshot"
        source_type = "conversation_transcript" if kind is C else "profile_snapshot"
        items.append(
            {
                "kind": kind,
                "memory_id": memory_id,
                "content": content,
                "summary": summary,
                "source": MemorySource(
                    source_id=f"{prefix}-{memory_id.split('-')[-1]}",
                    source_type=source_type,
                    title=title,
                    captured_at=captured_at,
                ),
            }
        )
    return tuple(items)


def fixed_clock(moment: datetime = SAMPLE_STORED_AT) -> Callable[[], datetime]:
    """A store clock that always says ``moment``, so ``stored_at`` is reproducible."""
    return lambda: moment


def load_sample_corpus(store: MemoryStore) -> tuple[StoredMemory, ...]:
    return store.append_many(sample_records())


def open_sample_store(
    root: str | Path, *, user_id: str = SAMPLE_USER_ID, load: bool = True
) -> RemoteMemoryStore:
    """A JSONL store under ``root`` with a fixed clock, holding the sample corpus."""
    store = RemoteMemoryStore(scope_path(root, user_id), user_id=user_id, clock=fixed_clock())
    if load and not store.read_all():
        load_sample_corpus(store)
    return store

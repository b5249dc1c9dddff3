"""The sample corpus that the tests, ``memlib demo`` and every notebook share.

Fixed timestamps in August 2026 and a fixed store clock make every recall over it
reproducible to the last digit. Some records are there to teach one thing each:
003 is the chapter's worked example (both terms, one day old → 0.995161); 005 and 006
tie on every score so only ``memory_id`` orders them; 009 is old, to show recency
decay; 002, 007, 010 and 011 are Chinese, mixed and Japanese; 008 has accents and ß.

The Chinese corpus (``lang="zh"``, for the zh edition and ``memlib demo --lang zh``) is
the same 15 records — ids, kinds, ``captured_at`` and source ids — written as a Chinese
team would write them, so the same lessons hold on Chinese text: 003 holds the whole of
``SAMPLE_QUERY_ZH`` one day before ``SAMPLE_AS_OF`` (0.995161 again), 005 and 006 tie,
011 stays Japanese (設計 is not 设计), 010 keeps ``llm记忆``.

The Chinese check set (``chinese_check_set_path``) is apart: two conversations of
about 150 turns each between two friends over months, with 60+ questions whose evidence
turns are known, in LoCoMo's format, written for memlib to measure recall on Chinese
(``memlib eval locomo --data "$(python -c 'import memlib.sample as s;
print(s.chinese_check_set_path())')"``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._runtime import scope_path
from .errors import RemoteMemoryValidationError
from .records import MemoryKind, MemorySource, StoredMemory
from .stores._base import MemoryStore
from .stores.jsonl._store import RemoteMemoryStore

__all__ = [
    "SAMPLE_USER_ID",
    "SAMPLE_AS_OF",
    "SAMPLE_STORED_AT",
    "SAMPLE_QUERY",
    "SAMPLE_QUERY_ZH",
    "SAMPLE_LANGUAGES",
    "sample_records",
    "load_sample_corpus",
    "open_sample_store",
    "fixed_clock",
    "scope_path",
    "chinese_check_set_path",
]

SAMPLE_USER_ID = "alice"
SAMPLE_AS_OF = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
SAMPLE_STORED_AT = datetime(2026, 8, 10, 8, 0, tzinfo=UTC)
SAMPLE_QUERY = "layered memory"
SAMPLE_QUERY_ZH = "分层记忆"

C, P = MemoryKind.CONVERSATION, MemoryKind.PROFILE

# (kind, memory_id, captured_at, title, summary, content)
_Row = tuple[MemoryKind, str, str, str, str, str]
_ROWS: tuple[_Row, ...] = (
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

# The same records in Chinese. A term matches only a whole term, so the wording decides
# what each query finds: keep 分层记忆 in 002 and 003 only, 向量重排 in 005 and 006 only,
# and 后端工程师 in the profiles only (03_candidates shows a profile is never a candidate).
_ROWS_ZH: tuple[_Row, ...] = (
    (C, "conversation-001", "2026-08-01T12:00:00Z", "持久化选型",
     "选定 SQLite WAL。",
     "本地持久化选定 SQLite WAL；教学默认仍用 JSONL 存储。"),
    (C, "conversation-002", "2026-08-03T09:30:00Z", "分层记忆设计",
     "讨论分层记忆的边界。",
     "我们讨论了分层记忆：工作区记忆、用户记忆和远程记忆各自有 owner 和来源。"),
    (C, "conversation-003", "2026-08-09T12:00:00Z", "分层记忆设计定稿",
     "划清工作区、用户和远程记忆的边界。",
     "确定分层记忆设计：工作区记忆、用户记忆和远程记忆分别有各自的 owner 和来源，互不混用。"),
    (C, "conversation-004", "2026-08-07T15:00:00Z", "召回工具契约",
     "recall_history 的查询必须复述主题。",
     "召回服务看不到当前对话，所以模型每次调用 recall_history 都要在查询里复述主题；"
     "“接着上次说”不算查询。"),
    (C, "conversation-005", "2026-08-05T08:00:00Z", "排序并列（A）",
     "暂缓引入向量重排。",
     "召回契约稳定之前，先不引入向量重排（embedding reranker）。"),
    (C, "conversation-006", "2026-08-05T08:00:00Z", "排序并列（B）",
     "同样暂缓向量重排。",
     "同样暂缓向量重排（embedding reranker）；混合检索也可以再等等。"),
    (C, "conversation-007", "2026-08-06T10:00:00Z", "大阪出差",
     "大阪出差的酒店偏好。",
     "用户去大阪出差时偏好靠近车站的酒店，预算每晚一万五千日元。"),
    (C, "conversation-008", "2026-07-28T18:00:00Z", "Café Lumière 课程规划",
     "在 Café Lumière 规划记忆课程。",
     "团队在柏林 Torstraße 的 Café Lumière 碰头，规划远程记忆课程。"),
    (C, "conversation-009", "2026-06-15T09:00:00Z", "保留策略",
     "对话记忆保留一年。",
     "决定对话记忆保留一年后复查；用户画像一直保留，直到被更新的快照取代。"),
    (C, "conversation-010", "2026-08-08T11:00:00Z", "LoCoMo 评测",
     "在 LoCoMo 上评测 llm记忆。",
     "在 LoCoMo 基准上测了 llm记忆 的召回：基线在前 10 条结果里找到约 42% 的证据轮次。"),
    (C, "conversation-011", "2026-08-04T13:00:00Z", "メモリ設計レビュー",
     "东京同事的评审记录（日文）。",
     "リモートメモリ設計のレビューを行い、プロファイルと会話記録を分けることにした。"),
    (C, "conversation-012", "2026-08-02T16:45:00Z", "追加式存储",
     "JSONL 追加写入时持锁并 fsync。",
     "每次追加都先取得建议锁，用 O_APPEND 写入完整的一行，确认之前先调用 fsync。"),
    (C, "conversation-013", "2026-07-10T10:15:00Z", "Prompt 预算",
     "渲染出的上下文必须放进 Prompt 预算。",
     "召回上下文渲染成带来源信息的 XML，必须放进 4,000 字符的 Prompt 预算；"
     "结果为空时什么也不渲染。"),
    (P, "profile-001", "2026-07-20T08:00:00Z", "用户画像快照（7 月）",
     "后端工程师；回答要简洁。",
     "Alice 是后端工程师，偏好简洁的回答，最好附上 Python 代码示例。"),
    (P, "profile-002", "2026-08-08T08:00:00Z", "用户画像快照（8 月）",
     "后端工程师，正在做记忆课程；中英双语。",
     "Alice 是后端工程师，正在做一门智能体记忆课程。她偏好简洁、附可运行代码的回答，"
     "喜欢中英文双语解释。常驻柏林，经常去大阪出差。"),
)

_CORPORA: dict[str, tuple[_Row, ...]] = {"en": _ROWS, "zh": _ROWS_ZH}
SAMPLE_LANGUAGES = tuple(_CORPORA)


def _rows(lang: str) -> tuple[_Row, ...]:
    rows = _CORPORA.get(lang) if isinstance(lang, str) else None
    if rows is None:
        raise RemoteMemoryValidationError(
            f"no sample corpus in {lang!r}; there are {', '.join(SAMPLE_LANGUAGES)}")
    return rows


def sample_records(lang: str = "en") -> tuple[dict[str, Any], ...]:
    """The corpus in ``lang`` (``en`` or ``zh``) as ``append_many`` items, in a fixed order."""
    items = []
    for kind, memory_id, captured_at, title, summary, content in _rows(lang):
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


def load_sample_corpus(store: MemoryStore, lang: str = "en") -> tuple[StoredMemory, ...]:
    return store.append_many(sample_records(lang))


def _check_language(records: tuple[StoredMemory, ...], lang: str) -> None:
    # Both corpora live at the same scope path: reopening a root that holds one corpus
    # with the other ``lang`` would silently hand back the wrong language.
    own = {content for *_, content in _rows(lang)}
    for other, rows in _CORPORA.items():
        theirs = {content for *_, content in rows} - own
        if other != lang and any(record.content in theirs for record in records):
            raise RemoteMemoryValidationError(
                f"this store holds the {other!r} sample corpus; "
                f"open the {lang!r} one under another root")


def open_sample_store(
    root: str | Path, *, user_id: str = SAMPLE_USER_ID, load: bool = True, lang: str = "en"
) -> RemoteMemoryStore:
    """A JSONL store under ``root`` with a fixed clock, holding the sample corpus in
    ``lang`` (``en`` or ``zh``; one corpus per root and user)."""
    _rows(lang)  # a bad ``lang`` is refused before anything is created
    store = RemoteMemoryStore(scope_path(root, user_id), user_id=user_id, clock=fixed_clock())
    if load:
        records = store.read_all()
        if not records:
            load_sample_corpus(store, lang)
        else:
            _check_language(records, lang)
    return store


def chinese_check_set_path() -> Path:
    """The packaged Chinese recall check set (LoCoMo format; module docstring)."""
    return Path(__file__).parent / "data" / "zh-check.json"

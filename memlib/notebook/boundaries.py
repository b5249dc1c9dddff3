"""Boundaries and review (notebook 13): the neighbouring chapters, the nine-item checklist
checked live, the no-key probe, the chapter's commands and memlib's. Every output is
deterministic: fixed query ids, no path, no pid, no clock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..candidates import build_recall_candidates, scan_recall_candidates, searchable_text
from ..engine import RecallEngine
from ..errors import RemoteMemoryError
from ..normalize import LIMIT_MAX, normalize_recall_query, normalize_text, tokenize
from ..rank import stable_rank_recall_candidates
from ..records import (
    LIMITS,
    MemoryKind,
    MemorySource,
    StoredMemory,
    parse_timestamp,
    user_scope_for,
)
from ..render import render_recall_context
from ..result import RecallHit, RecallResult
from ..score import score_recall_candidate
from ..stores._base import MemoryStore
from . import frames
from ._common import QUERY_ID, course_data, pandas
from .language import tr
from .refusals import redact
from .views import recall, recall_query

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# What the online path needs and nothing else may read: the probe watches for these.
KEY_VARIABLES: tuple[str, ...] = ("ANTHROPIC_API_KEY", "MODEL_ID")


# -- 1 · the neighbouring chapters ---------------------------------------------------------
@dataclass(frozen=True)
class Boundary:
    """One row of the chapter's boundary table, and where memlib stands on it."""

    chapter: str
    name: str
    owner: str
    core_object: str
    question: str
    in_memlib: str


_DATA = course_data("boundaries")  # memlib/data/boundaries.json: the chapter's tables
BOUNDARIES: tuple[Boundary, ...] = tuple(Boundary(**row) for row in _DATA["boundaries"])


def _conversations(store: MemoryStore) -> list[StoredMemory]:
    return [r for r in store.read_all() if r.kind is MemoryKind.CONVERSATION]


def _boundary_facts(store: MemoryStore, query: str, as_of: datetime) -> dict[str, str]:
    """One fact per chapter, read from ``store`` now (what the row claims, seen live)."""
    records = store.read_all()
    talks = _conversations(store)
    cited = sum(r.source.source_type == "conversation_transcript" for r in talks)
    fields = [f.name for f in dataclasses.fields(StoredMemory)]
    project_fields = [f for f in fields if "workspace" in f or "project" in f]
    profile = store.latest_profile()
    if profile is not None:
        own_words = recall(store, profile.summary, as_of, LIMIT_MAX).hits
        profile_hits = sum(h.scope.memory_kind is MemoryKind.PROFILE for h in own_words)
        s11 = (
            f"the latest profile searched with its own summary: {len(own_words)} hits, "
            f"{profile_hits} of them a profile"
        )
    else:
        s11 = "this store holds no profile"
    result = recall(store, query, as_of, 5)
    payload = result.to_json()
    by_id = {r.memory_id: r for r in records}
    contents = sum(by_id[h.memory_id].content in payload for h in result.hits)
    return {
        "s09": f"{cited} of {len(talks)} conversation records cite a conversation_transcript",
        "s10": (
            f"StoredMemory fields: {', '.join(fields)} — "
            f"{len(project_fields)} name a workspace or project"
        ),
        "s11": s11,
        "s12": (
            f"{query!r}: {result.searched_records} searched → "
            f"{result.candidate_records} candidates → {len(result.hits)} hits; "
            f"{len(records)} records before and {len(store.read_all())} after"
        ),
        "s13": (
            f"at most {LIMIT_MAX} hits × a summary of ≤ {LIMITS['summary']:,} chars; "
            f"the content of {contents} of {len(result.hits)} hits is in the JSON"
        ),
    }


def boundary_frame(store: MemoryStore, query: str, as_of: datetime) -> pd.DataFrame:
    """The boundary table, with a fact per row computed from ``store`` now."""
    facts = _boundary_facts(store, query, as_of)
    rows = [
        {
            tr("chapter", "模块"): f"{b.chapter} {b.name}",
            tr("owner", "所有者"): b.owner,
            tr("core object", "核心对象"): b.core_object,
            tr("answers", "回答的问题"): b.question,
            tr("in memlib", "在 memlib 中"): b.in_memlib,
            tr("seen in this store now", "此刻在这个存储中看到"): facts[b.chapter],
        }
        for b in BOUNDARIES
    ]
    return pandas().DataFrame(rows)


# -- 2 · the nine-item checklist -------------------------------------------------------------
_Outcome = tuple[bool, str]


@dataclass(frozen=True)
class ChecklistItem:
    """One question of the checklist, the notebooks that teach it, and its live check:
    ``check(store, query, as_of)`` returns ``(holds, what it saw in one line)``."""

    number: int
    zh: str
    en: str
    proved_in: tuple[str, ...]
    check: Callable[[MemoryStore, str, datetime], _Outcome]


def _check_self_contained(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    from ..agent.tools import RECALL_HISTORY_DESCRIPTION

    params = [p for p in inspect.signature(RecallEngine.recall).parameters if p != "self"]
    sees_chat = [p for p in params if p in ("messages", "history", "chat", "conversation")]
    warns = "'continue last time'" in RECALL_HISTORY_DESCRIPTION
    fact = tr(
        f"recall takes only ({', '.join(params)}) — no chat; the tool description "
        f"{'says' if warns else 'does not say'} 'continue last time' is not a query",
        f"recall 只接受（{', '.join(params)}），不接受对话；工具说明"
        f"{'写明了' if warns else '没有写明'}「continue last time」不是查询",
    )
    return not sees_chat and warns, fact


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _check_normalize(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    forms = (query, f"  {query.upper()}  ", _fullwidth(query))
    terms = {recall_query(store, form, as_of).terms for form in forms}
    chinese = "分层记忆"
    pairs = tuple(sorted({chinese[i : i + 2] for i in range(len(chinese) - 1)}))
    cjk = recall_query(store, chinese, as_of).terms
    spellings = ", ".join(repr(f) for f in forms)
    fact = tr(
        f"{len(forms)} spellings ({spellings}) → {len(terms)} term set; "
        f"{chinese} → {', '.join(cjk)}",
        f"{len(forms)} 种写法（{spellings}）→ {len(terms)} 组词项；{chinese} → {'、'.join(cjk)}",
    )
    return len(terms) == 1 and cjk == pairs, fact


def _check_counts(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    result = recall(store, query, as_of, 5)
    terms = set(result.query.terms)
    retracted = {r.retracts for r in store.read_all() if r.kind is MemoryKind.RETRACTION}
    live = [r for r in _conversations(store) if r.memory_id not in retracted]
    sharing = [r for r in live if terms & set(tokenize(searchable_text(r)))]
    fact = tr(
        f"{result.searched_records} searched (counted here: {len(live)}), "
        f"{result.candidate_records} candidates (counted here: {len(sharing)}), "
        f"{len(result.hits)} hits",
        f"检索 {result.searched_records} 条（此处数得 {len(live)}），"
        f"候选 {result.candidate_records} 条（此处数得 {len(sharing)}），"
        f"命中 {len(result.hits)} 条",
    )
    holds = (
        result.searched_records == len(live)
        and result.candidate_records == len(sharing)
        and result.searched_records >= result.candidate_records >= len(result.hits)
    )
    return holds, fact


def _check_query_id(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    q = recall_query(store, query, as_of, query_id="review-1")
    other = recall_query(store, query, as_of, query_id="review-2")
    candidates = scan_recall_candidates(q, store.read_all()).candidates
    hits = recall(store, query, as_of, query_id="review-1").hits
    ids = {c.query_id for c in candidates} | {h.query_id for h in hits}
    refused, said = (
        _refusal(lambda: score_recall_candidate(other, candidates[0], as_of=as_of))
        if candidates
        else (False, tr("(no candidate to try)", "（没有可试的候选）"))
    )
    carried = ", ".join(sorted(ids))
    fact = tr(
        f"{len(candidates)} candidates and {len(hits)} hits all carry {carried}; "
        f"scoring one for review-2: {said}",
        f"{len(candidates)} 个候选和 {len(hits)} 个命中都带着 {carried}；"
        f"拿其中一个为 review-2 评分：{said}",
    )
    return ids == {"review-1"} and refused, fact


def _refusal(action: Callable[[], Any]) -> tuple[bool, str]:
    """Whether ``action`` was refused with a memlib error, and that in words."""
    try:
        action()
    except RemoteMemoryError as exc:
        said = f"{type(exc).__name__}: {exc}"
        return True, tr(f"refused ({said})", f"被拒绝（{said}）")
    return False, tr("accepted", "被接受")


def _check_scope_provenance(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    hits = recall(store, query, as_of, LIMIT_MAX).hits
    by_id = {r.memory_id: r for r in store.read_all()}
    complete = [
        h
        for h in hits
        if h.scope.user_scope == store.user_scope == by_id[h.memory_id].user_scope
        and h.scope.memory_kind is by_id[h.memory_id].kind
        and h.provenance == by_id[h.memory_id].source
    ]
    fact = tr(
        f"{len(complete)} of {len(hits)} hits carry the store's scope and exactly "
        "their record's source",
        f"{len(hits)} 个命中中有 {len(complete)} 个带着存储的作用域和其记录的原样来源",
    )
    return len(complete) == len(hits), fact


def _check_contributions(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    hits = recall(store, query, as_of, LIMIT_MAX).hits
    if not hits:
        return True, tr("no hit to explain", "没有可解释的命中")
    explained = [h for h in hits if _explained(h)]
    b = hits[0].score_breakdown
    sum_ = (
        f"{b.lexical_weight} × {b.lexical_coverage} + {b.recency_weight} × {b.recency} = {b.total}"
    )
    fact = tr(
        f"rank 1: {sum_}; {len(explained)} of {len(hits)} hits add up",
        f"第 1 名：{sum_}；{len(hits)} 个命中中有 {len(explained)} 个加得上",
    )
    return len(explained) == len(hits), fact


def _explained(hit: RecallHit) -> bool:
    b = hit.score_breakdown
    return (
        b.lexical_coverage == round(len(b.matched_terms) / b.query_term_count, 6)
        and abs(b.lexical_contribution - b.lexical_weight * b.lexical_coverage) <= 1e-6
        and abs(b.recency_contribution - b.recency_weight * b.recency) <= 1e-6
        and abs(b.total - (b.lexical_contribution + b.recency_contribution)) <= 1e-6
    )


def _check_storage_order(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    q = recall_query(store, query, as_of, limit=LIMIT_MAX)
    candidates = list(scan_recall_candidates(q, store.read_all()).candidates)
    shuffled = candidates[:]
    random.Random(12).shuffle(shuffled)
    orders = [candidates, candidates[::-1], shuffled]
    ranked = {
        tuple(h.memory_id for h in stable_rank_recall_candidates(q, order, as_of=as_of))
        for order in orders
    }
    fact = tr(
        f"{len(candidates)} candidates in {len(orders)} orders (as stored, reversed, "
        f"shuffled) → {len(ranked)} ranking",
        f"{len(candidates)} 个候选按 {len(orders)} 种顺序（存储顺序、倒序、打乱）"
        f"→ {len(ranked)} 种排名",
    )
    return len(ranked) == 1, fact


def _check_limit_scope(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    counts = [len(recall(store, query, as_of, n).hits) for n in range(1, LIMIT_MAX + 1)]
    within = all(c <= n for n, c in zip(range(1, LIMIT_MAX + 1), counts, strict=True))
    stranger = normalize_recall_query(
        query, user_scope=user_scope_for("mallory"), query_id=QUERY_ID, issued_at=as_of
    )
    refused, said = _refusal(lambda: build_recall_candidates(stranger, store.read_all()))
    shown = ", ".join(map(str, counts))
    fact = tr(
        f"limit 1…{LIMIT_MAX} → {shown} hits; another user's query over these records: {said}",
        f"limit 1…{LIMIT_MAX} → 命中 {shown} 条；另一个用户的查询作用于这些记录：{said}",
    )
    return within and refused, fact


def _fingerprint(store: MemoryStore) -> tuple[int, dict[str, str]]:
    path = getattr(store, "path", None)
    files: dict[str, str] = {}
    if isinstance(path, Path) and path.parent.is_dir():
        for item in sorted(path.parent.iterdir()):
            if item.is_file():
                files[item.name] = hashlib.sha256(item.read_bytes()).hexdigest()
    return len(store.read_all()), files


def _check_read_only(store: MemoryStore, query: str, as_of: datetime) -> _Outcome:
    before = _fingerprint(store)
    for limit in (1, 5, LIMIT_MAX):
        recall(store, query, as_of, limit)
    after = _fingerprint(store)
    same = before == after
    fact = tr(
        f"3 recalls: {before[0]} records before, {after[0]} after; "
        f"{len(after[1])} store files, {'none' if same else 'some'} changed",
        f"3 次召回：之前 {before[0]} 条记录，之后 {after[0]} 条；"
        f"{len(after[1])} 个存储文件，{'没有' if same else '有'}文件改变",
    )
    return same, fact


# The live check of each item of memlib/data/boundaries.json's checklist, by its "check".
_CHECKS: dict[str, Callable[[MemoryStore, str, datetime], _Outcome]] = {
    "self_contained": _check_self_contained,
    "normalize": _check_normalize,
    "counts": _check_counts,
    "query_id": _check_query_id,
    "scope_provenance": _check_scope_provenance,
    "contributions": _check_contributions,
    "storage_order": _check_storage_order,
    "limit_scope": _check_limit_scope,
    "read_only": _check_read_only,
}
CHECKLIST: tuple[ChecklistItem, ...] = tuple(
    ChecklistItem(n, item["zh"], item["en"], tuple(item["proved_in"]), _CHECKS[item["check"]])
    for n, item in enumerate(_DATA["checklist"], start=1)
)


def checklist_frame(store: MemoryStore, query: str, as_of: datetime) -> pd.DataFrame:
    """The nine items, each checked on ``store`` now: what was seen, and does it hold."""
    rows = []
    for item in CHECKLIST:
        holds, fact = item.check(store, query, as_of)
        rows.append((item.number, item.en, item.zh, ", ".join(item.proved_in), fact, holds))
    proved, checked = tr("proved in", "在哪里验证"), tr("checked now", "此刻检查所见")
    return pandas().DataFrame(rows, columns=["item", "checklist", "清单", proved, checked, "holds"])


# -- a single result: what it alone can show (items 2–8) ---------------------------------
RESULT_ITEMS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)


def _hit_key(hit: RecallHit) -> tuple[float, float, float, str]:
    """Stage 4's key (``memlib.rank.rank_key``), read from a hit instead of a candidate."""
    b = hit.score_breakdown
    return (
        -b.total,
        -b.lexical_coverage,
        -hit.provenance.captured_datetime.timestamp(),
        hit.memory_id,
    )


def _full(p: MemorySource) -> bool:
    return all((p.source_id, p.source_type, p.title, p.captured_at))


def audit_result(result: RecallResult) -> dict[int, _Outcome]:
    """Items 2–8 checked on one result alone: ``{item: (holds, what was seen)}`` (1 and 9
    need more than a result; 6 is the baseline's arithmetic, another ranker's differs)."""
    q, hits = result.query, result.hits
    again = normalize_recall_query(
        q.text,
        user_scope=q.user_scope,
        limit=q.limit,
        query_id=q.query_id,
        issued_at=parse_timestamp(q.issued_at),
    )
    stable = (
        again.normalized_text == normalize_text(q.text) == q.normalized_text
        and again.terms == q.terms
    )
    bound = [h for h in hits if h.query_id == q.query_id]
    complete = [
        h for h in hits if h.scope.memory_kind is MemoryKind.CONVERSATION and _full(h.provenance)
    ]
    explained = [h for h in hits if _explained(h)]
    keys = [_hit_key(h) for h in hits]
    ordered = [h.rank for h in hits] == list(range(1, len(hits) + 1)) and keys == sorted(keys)
    scoped = [h for h in hits if h.scope.user_scope == q.user_scope]
    terms, again_terms = ", ".join(q.terms), ", ".join(again.terms)
    return {
        2: _said(
            stable,
            f"normalizing {q.text!r} again gives the same terms ({terms})",
            f"再次规范化 {q.text!r} 得到相同的词项（{terms}）",
        )
        if stable
        else _said(
            stable,
            f"normalizing {q.text!r} again gives ({again_terms}), not ({terms})",
            f"再次规范化 {q.text!r} 得到（{again_terms}），而不是（{terms}）",
        ),
        3: _said(
            result.searched_records >= result.candidate_records >= len(hits),
            f"{result.searched_records} searched ≥ {result.candidate_records} candidates ≥ "
            f"{len(hits)} hits",
            f"被检索 {result.searched_records} 条 ≥ 候选 {result.candidate_records} 条 ≥ "
            f"命中 {len(hits)} 条",
        ),
        4: _said(
            len(bound) == len(hits),
            f"{len(bound)} of {len(hits)} hits carry the query's id {q.query_id!r}",
            f"{len(hits)} 个命中中有 {len(bound)} 个带着查询的 id {q.query_id!r}",
        ),
        5: _said(
            len(complete) == len(hits),
            f"{len(complete)} of {len(hits)} hits have a conversation scope and a full source",
            f"{len(hits)} 个命中中有 {len(complete)} 个具有 conversation 作用域和完整的来源",
        ),
        6: _said(
            len(explained) == len(hits),
            f"{len(explained)} of {len(hits)} totals are weight × value summed",
            f"{len(hits)} 个总分中有 {len(explained)} 个等于各项权重 × 取值之和",
        ),
        7: _said(
            ordered,
            f"{'ranks 1…n' if ordered else 'the ranks do not'} follow total ↓, coverage ↓, "
            "captured_at ↓, memory_id ↑",
            f"名次{'按' if ordered else '没有按'} total ↓、coverage ↓、captured_at ↓、"
            "memory_id ↑ 排列",
        ),
        8: _said(
            len(hits) <= q.limit and len(scoped) == len(hits),
            f"{len(hits)} hits for limit {q.limit}; {len(scoped)} in the query's user scope",
            f"limit 为 {q.limit} 时有 {len(hits)} 个命中；其中 {len(scoped)} 个在查询的"
            "用户作用域内",
        ),
    }


def _said(holds: bool, en: str, zh: str) -> _Outcome:
    return holds, tr(en, zh)


def tampered_results(store: MemoryStore, as_of: datetime) -> dict[str, RecallResult]:
    """Three results a broken service could return, each failing one audit item: A, tied
    hits in storage order; B, recency dropped from the totals; C, the limit ignored."""
    tie = recall(store, "embedding reranker", as_of, 5)
    first, second, *rest = tie.hits
    swapped = [dataclasses.replace(second, rank=1), dataclasses.replace(first, rank=2), *rest]
    plain = recall(store, "layered memory", as_of, 5)
    no_recency = [
        dataclasses.replace(
            h,
            score_breakdown=dataclasses.replace(
                h.score_breakdown, total=h.score_breakdown.lexical_contribution
            ),
        )
        for h in plain.hits
    ]
    narrow = dataclasses.replace(plain.query, limit=len(plain.hits) - 1)
    return {
        "A": dataclasses.replace(tie, hits=tuple(swapped)),
        "B": dataclasses.replace(plain, hits=tuple(no_recency)),
        "C": dataclasses.replace(plain, query=narrow),
    }


def describe_result(result: RecallResult) -> str:
    """The query and counts of a result, in one line."""
    q = result.query
    return (
        f"query {q.text!r} · query_id {q.query_id} · limit {q.limit} · user_scope "
        f"{q.user_scope} · {result.searched_records} searched · "
        f"{result.candidate_records} candidates · {len(result.hits)} hits"
    )


def hits_frame(result: RecallResult) -> pd.DataFrame:
    """Every field a checklist item looks at, one hit a row."""
    return frames.hits_frame(result, tuple(c for c in frames._HIT_FIELDS if c != "matched_terms"))


# -- 3 · the no-key boundary: a probe in a clean interpreter --------------------------------
# Runs as ``python -I -B -c _PROBE_SCRIPT <memlib's folder> <code> <marker>``. The audit
# hook (PEP 578) and the recording os.environ are in place before ``code`` runs; their
# record starts then and stops before the report is printed, so Python's own start-up
# and the report itself are not counted.
_PROBE_SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
code, marker = sys.argv[2], sys.argv[3]
report = {"sockets": 0, "connections": 0, "written": [], "folders": [], "processes": 0,
          "env": []}
state = {"on": False, "busy": False}
WRITE = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
NETWORK = {"socket.connect", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg"}
SPAWN = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
         "os.fork", "os.forkpty"}

def hook(event, args):
    if not state["on"] or state["busy"]:
        return
    state["busy"] = True
    try:
        if event == "open":
            path, flags = args[0], args[2]
            if isinstance(flags, int) and flags & WRITE and not isinstance(path, int):
                report["written"].append(os.path.abspath(os.fsdecode(path)))
        elif event == "socket.__new__":
            report["sockets"] += 1
        elif event in NETWORK:
            report["connections"] += 1
        elif event == "os.mkdir":
            report["folders"].append(os.path.abspath(os.fsdecode(args[0])))
        elif event in SPAWN:
            report["processes"] += 1
    finally:
        state["busy"] = False

sys.addaudithook(hook)

class RecordingEnviron(type(os.environ)):
    # os.getenv, environ.get and "in" all end here.
    def __getitem__(self, key):
        if state["on"] and key not in report["env"]:
            report["env"].append(key)
        return super().__getitem__(key)

os.environ.__class__ = RecordingEnviron
error = None
state["on"] = True
try:
    exec(compile(code, "<probe>", "exec"), {"__name__": "__probe__"})
except BaseException as exc:
    error = type(exc).__name__ + (": " + " ".join(str(exc).split()) if str(exc) else "")
state["on"] = False
report["error"] = error
report["anthropic"] = "anthropic" in sys.modules
sys.stdout.flush()
print("\n" + marker + json.dumps(report))
"""
_MARKER = "memlib-probe-report:"


@dataclass(frozen=True)
class ProbeReport:
    """What ``code`` did in a clean interpreter, paths relative to the probe's folders."""

    code: str
    sockets: int
    connections: int
    files_written: tuple[str, ...]
    folders_created: tuple[str, ...]
    processes: int
    env_read: tuple[str, ...]
    anthropic_imported: bool
    error: str | None
    left_on_disk: tuple[str, ...]
    printed: str

    @property
    def key_variables_read(self) -> tuple[str, ...]:
        return tuple(name for name in self.env_read if name in KEY_VARIABLES)

    def row(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "sockets": self.sockets,
            tr("files written", "写入的文件"): len(self.files_written),
            tr("folders created", "创建的文件夹"): len(self.folders_created),
            tr("variables read", "读取的变量"): len(self.env_read),
            tr("key variables read", "读取的密钥变量"): ", ".join(self.key_variables_read)
            or "none",
            tr("anthropic imported", "导入了 anthropic"): self.anthropic_imported,
            tr("outcome", "结果"): self.error or "ok",
        }


@contextmanager
def _fresh_root(prefix: str) -> Iterator[Path]:
    """A new folder holding the ``_folders`` a clean interpreter runs in."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        root = Path(folder)
        for sub in _folders(root):
            sub.mkdir()
        yield root


def _run_clean(
    root: Path,
    script: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """``script`` in ``python -I -B`` (no ``.pyc``: Python's write, not the code's) in
    ``root/cwd``, HOME and TMPDIR in ``root``, without the key or memlib's settings."""
    memlib_parent = str(Path(__file__).resolve().parents[2])
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "WORKBUDDY_", "MEMLIB_"))
        and name not in (*KEY_VARIABLES, "HOME", "TMPDIR")
    }
    clean.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-I", "-B", "-c", script, memlib_parent, *args],
        cwd=root / "cwd",
        env={**clean, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )


def _folders(root: Path) -> dict[Path, str]:
    return {root / "home": "~", root / "cwd": ".", root / "tmp": "$TMPDIR"}


def _shown(path: str, root: Path) -> str:
    """A path as ``~/…``, ``./…`` or ``$TMPDIR/…``; anything else by its name only."""
    target = Path(path)
    for folder, label in _folders(root).items():
        for base in {folder, folder.resolve()}:
            if target == base or base in target.parents:
                relative = target.relative_to(base).as_posix()
                return label if relative == "." else f"{label}/{relative}"
    return f"<elsewhere>/{target.name}"


def probe(code: str, *, env: Mapping[str, str] | None = None, timeout: float = 120) -> ProbeReport:
    """Run ``code`` in a clean interpreter (``env`` adds variables) and report its side
    effects, seen by an audit hook and a recording ``os.environ``; an exception is reported."""
    with _fresh_root("memlib-probe-") as root:
        before = set(_tree(root))
        proc = _run_clean(root, _PROBE_SCRIPT, code, _MARKER, env=env, timeout=timeout)
        printed, _, data = proc.stdout.rpartition(_MARKER)
        if proc.returncode != 0 or not data:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the probe did not finish (exit {proc.returncode}): {last}")
        report = json.loads(data)
        left = tuple(_shown(str(p), root) for p in _tree(root) if p not in before)
        return ProbeReport(
            code=code,
            sockets=report["sockets"],
            connections=report["connections"],
            files_written=tuple(_shown(p, root) for p in report["written"]),
            folders_created=tuple(_shown(p, root) for p in report["folders"]),
            processes=report["processes"],
            env_read=tuple(report["env"]),
            anthropic_imported=report["anthropic"],
            error=report["error"],
            left_on_disk=left,
            printed=printed.rstrip("\n"),
        )


def _tree(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() or not any(p.iterdir()))


def probe_frame(reports: Iterable[ProbeReport]) -> pd.DataFrame:
    """One probe a row: what it opened, wrote and read, and how it ended."""
    return pandas().DataFrame([r.row() for r in reports])


# -- 4 · the chapter's commands and memlib's -------------------------------------------------
@dataclass(frozen=True)
class CliRun:
    """One ``memlib`` command: its exit status and what it printed (the folder as <root>)."""

    args: tuple[str, ...]
    status: int
    stdout: str
    stderr: str


def run_cli(*args: str, stdin: str | None = None, timeout: float = 120) -> CliRun:
    """``memlib ARGS`` in a fresh interpreter and folder (``{root}``, shown ``<root>``)."""
    starter = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "from memlib.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    with _fresh_root("memlib-cli-") as root:
        argv = [a.replace("{root}", str(root)) for a in args]
        proc = _run_clean(root, starter, *argv, stdin=stdin, timeout=timeout)
        out, err = (redact(text, root, shown="<root>") for text in (proc.stdout, proc.stderr))
        return CliRun(tuple(args), proc.returncode, out, err)


def cli_commands() -> tuple[str, ...]:
    """The commands ``memlib --help`` lists, in its order."""
    text = run_cli("--help").stdout
    return tuple(re.findall(r"^    ([a-z][\w-]*)\s{2,}", text, flags=re.MULTILINE))


def cli_section(text: str, heading: str) -> str:
    """The lines of ``text`` after the ``# {heading}…`` line, up to the next ``# `` line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {heading}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# ")), len(lines))
    return "\n".join(lines[start + 1 : end]).strip("\n")


@dataclass(frozen=True)
class Command:
    """A command or call of the chapter and what does the same in memlib."""

    chapter: str
    memlib_cli: str
    python: str
    note: str


COMMAND_MAP: tuple[Command, ...] = tuple(Command(**row) for row in _DATA["commands"])


def commands_frame(commands: Sequence[str] | None = None) -> pd.DataFrame:
    """``COMMAND_MAP`` as a table, and whether ``memlib --help`` lists each command."""
    listed = set(cli_commands() if commands is None else commands)
    rows = []
    for c in COMMAND_MAP:
        words = c.memlib_cli.split()
        name = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "memlib"), None)
        is_listed = None if name is None else name in listed
        rows.append(
            {
                tr("chapter", "本章"): c.chapter,
                "memlib": c.memlib_cli,
                "Python": c.python,
                tr("note", "说明"): c.note,
                tr("listed by memlib --help", "memlib --help 是否列出"): is_listed,
            }
        )
    return pandas().DataFrame(rows)


# -- 5 · other rankers, the same contract ----------------------------------------------------
def contract_shape_frame(
    store: MemoryStore,
    query: str,
    as_of: datetime,
    rankers: Sequence[str] = ("baseline", "bm25", "bm25+stopwords"),
) -> pd.DataFrame:
    """For each ranker: its top hit, and whether its result has the baseline's shape."""

    def shape(result: RecallResult) -> tuple[list[str], list[str], list[str]]:
        data = result.to_dict()
        hit = data["hits"][0] if data["hits"] else {}
        return sorted(data), sorted(hit), sorted(hit.get("score_breakdown", {}))

    results = {
        name: RecallEngine(store, ranker=name).recall(
            query, limit=5, as_of=as_of, query_id=QUERY_ID
        )
        for name in rankers
    }
    base = shape(results[rankers[0]])
    rows = []
    for name, result in results.items():
        keys, hit, breakdown = shape(result)
        added = ", ".join(k for k in breakdown if k not in base[2]) or "—"
        renders = render_recall_context(result).startswith("<recalled_context")
        rows.append(
            {
                tr("ranker", "排序器"): name,
                tr("top hit", "第一个命中"): result.hits[0].memory_id if result.hits else None,
                tr("same result keys", "结果的键相同"): keys == base[0],
                tr("same hit keys", "命中的键相同"): hit == base[1],
                tr("breakdown keys added", "明细新增的键"): added,
                tr("renders", "能渲染"): renders,
            }
        )
    return pandas().DataFrame(rows)


# -- 6 · one query_id through every stage -----------------------------------------------------
def query_id_frame(
    store: MemoryStore, query: str, as_of: datetime, query_id: str = "review-1"
) -> pd.DataFrame:
    """Where ``query_id`` appears, stage by stage, for one recall run by hand."""
    q = recall_query(store, query, as_of, query_id=query_id)
    candidates = scan_recall_candidates(q, store.read_all()).candidates
    breakdowns = [score_recall_candidate(q, c, as_of=as_of) for c in candidates]
    hits = stable_rank_recall_candidates(q, candidates, as_of=as_of)
    result = recall(store, query, as_of, query_id=query_id)
    payload = result.to_dict()
    in_payload = [payload["query"]["query_id"], *(h["query_id"] for h in payload["hits"])]
    rendered = re.findall(r'<recalled_context query_id="([^"]*)"', render_recall_context(result))
    no_field = tr(
        "(no field: made from a candidate of this query, checked by score_recall_candidate)",
        "（没有这个字段：由本查询的候选算出，score_recall_candidate 负责检查）",
    )

    def ids(values: Iterable[str]) -> str:
        return ", ".join(sorted(set(values))) or "—"

    rows = [
        ("normalize", "RecallQuery", 1, q.query_id),
        ("candidate", "RecallCandidate", len(candidates), ids(c.query_id for c in candidates)),
        ("score", "RecallScoreBreakdown", len(breakdowns), no_field),
        ("stable rank", "RecallHit", len(hits), ids(h.query_id for h in hits)),
        ("result", "to_json() query + hits", len(in_payload), ids(in_payload)),
        ("render", "<recalled_context query_id=…>", 1, ids(rendered)),
    ]
    columns = [tr("stage", "阶段"), tr("object", "对象"), tr("count", "数量"), "query_id"]
    return pandas().DataFrame(rows, columns=columns)


# -- 7 · the explorer's view: the whole pipeline for one query --------------------------------
def review_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """One recall reviewed stage by stage, every value a string (a table or a widget)."""
    result = recall(store, query, as_of, limit)
    q = result.query
    best = max((h.score_breakdown.total for h in result.hits), default=None)
    hits_label = tr(f"hits (limit {q.limit})", f"命中数（limit {q.limit}）")
    bound = str(all(h.query_id == q.query_id for h in result.hits))
    rows = [
        ("normalize", "normalized_text", q.normalized_text),
        ("normalize", "terms", ", ".join(q.terms)),
        ("normalize", "query_id", q.query_id),
        ("store", tr("stored records", "存储记录数"), str(len(store.read_all()))),
        ("candidate", "searched_records", str(result.searched_records)),
        ("candidate", "candidate_records", str(result.candidate_records)),
        ("candidate", "retracted_records", str(result.retracted_records)),
        ("score", tr("best total", "最高 total"), "—" if best is None else f"{best:.6f}"),
        ("stable rank", hits_label, str(len(result.hits))),
        ("stable rank", tr("rank 1", "第 1 名"), result.hits[0].memory_id if result.hits else "—"),
        ("result", tr("every hit bound to query_id", "每个命中都绑定 query_id"), bound),
        ("result", "empty_reason", str(result.empty_reason)),
        ("result", tr("tool JSON chars", "工具 JSON 字符数"), str(len(result.to_json()))),
        ("render", tr("rendered chars", "渲染出的字符数"), str(len(render_recall_context(result)))),
    ]
    modules = {"store": "stores", "candidate": "candidates", "stable rank": "rank"}
    columns = [tr("stage", "阶段"), tr("module", "模块"), tr("output", "输出"), tr("value", "值")]
    staged = [(s, f"memlib.{modules.get(s, s)}", o, v) for s, o, v in rows]
    return pandas().DataFrame(staged, columns=columns)

"""Recall evaluation on LoCoMo (Maharana et al., 2024; ``shared/data/locomo/README.md``):
one record per turn, each QA with evidence a query over its own conversation at its last
session's date. R@k = share of the evidence turns in the top k, H@k = share of questions
with one there; Sany@k / Sall@k = share with a top-k turn in one / every evidence session.
A record's summary is its content: for BM25 the ranking of counting once with k1 halved."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._capabilities import DenseScoring
from .._retrieval.inverted import InvertedIndex, lexical_from_index
from .._tokens import english_stopwords
from .._vectors import DenseScores
from ..candidates import CandidateScan, RecallCandidate, make_candidate, searchable_text
from ..errors import RemoteMemoryValidationError
from ..normalize import LIMIT_MAX, RecallQuery, normalize_recall_query, tokenize_all
from ..rank import rank_scored_candidates
from ..rankers import Ranker, get_ranker
from ..records import (
    MemoryKind,
    MemorySource,
    SourceNeighbours,
    StoredMemory,
    format_timestamp,
    user_scope_for,
)
from ..result import RecallHit
from ..stores._base import pair_texts

__all__ = [
    "LocomoQuestion",
    "LocomoConversation",
    "load_locomo",
    "parse_locomo",
    "clean_evidence",
    "evaluate_ranker",
    "conversation_rows",
    "rank_hits",
    "rank_question",
    "ConversationIndex",
    "ConversationVectors",
    "format_table",
    "CATEGORY_NAMES",
    "HEADLINE_CATEGORIES",
    "DEFAULT_KS",
]

DATE_FORMAT = "%I:%M %p on %d %B, %Y"
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
HEADLINE_CATEGORIES = (1, 2, 3, 4)
DEFAULT_KS = (1, 5, 10)
SUMMARY_MAX = 2_000
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class LocomoQuestion:
    question_id: str
    question: str
    category: int
    evidence: tuple[str, ...]  # memory ids, cleaned, distinct, in the order given


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    user_scope: str
    records: tuple[StoredMemory, ...]
    questions: tuple[LocomoQuestion, ...]
    as_of: datetime


def clean_evidence(raw: Iterable[Any], turn_ids: set[str]) -> tuple[str, ...]:
    """``["D8:6; D9:17", "D:11:26", "D30:05"]`` → ``("D8:6", "D9:17", "D11:26", "D30:5")``,
    the ids that name a turn of the conversation."""
    cleaned: list[str] = []
    for item in raw:
        for piece in _EVIDENCE_SPLIT.split(str(item)):
            match = _EVIDENCE_ID.fullmatch(piece.strip())
            if not match:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in turn_ids and dia_id not in cleaned:
                cleaned.append(dia_id)
    return tuple(cleaned)


def parse_locomo(data: Sequence[Mapping[str, Any]]) -> tuple[LocomoConversation, ...]:
    """LoCoMo JSON (a list of samples) → conversations with records and questions; data
    of another shape is one validation error, never a traceback."""
    try:
        return _parse(data)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise RemoteMemoryValidationError(
            f"LoCoMo data is malformed: {type(exc).__name__}: {exc}"
        ) from None


def _parse(data: Sequence[Mapping[str, Any]]) -> tuple[LocomoConversation, ...]:
    if not isinstance(data, list):
        raise RemoteMemoryValidationError("LoCoMo data must be a JSON list of samples")
    conversations = []
    for sample in data:
        sample_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        scope = user_scope_for(f"locomo/{sample_id}")
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conversation
            if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conversation[key], list)
        )
        if not sessions:
            raise RemoteMemoryValidationError(f"LoCoMo sample {sample_id} has no session")
        records: list[StoredMemory] = []
        last_date: datetime | None = None
        for number, key in sessions:
            text = conversation[f"{key}_date_time"]
            try:
                date = datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=UTC)
            except ValueError:
                raise RemoteMemoryValidationError(
                    f"invalid LoCoMo session date: {text!r}"
                ) from None
            last_date = date
            captured = format_timestamp(date)
            for turn in conversation[key]:
                dia_id = str(turn["dia_id"])
                content = f"{turn['speaker']}: {turn.get('text', '')}"
                if turn.get("blip_caption"):
                    content += f" [shared an image: {turn['blip_caption']}]"
                records.append(
                    StoredMemory(
                        memory_id=f"{sample_id}/{dia_id}",
                        user_scope=scope,
                        kind=MemoryKind.CONVERSATION,
                        content=content,
                        summary=content[:SUMMARY_MAX],
                        source=MemorySource(
                            source_id=f"{sample_id}/session_{number}",
                            source_type="locomo_turn",
                            title=f"{sample_id} session {number}",
                            captured_at=captured,
                        ),
                        stored_at=captured,
                    )
                )
        assert last_date is not None
        turn_ids = {r.memory_id.split("/", 1)[1] for r in records}
        questions = []
        for index, qa in enumerate(sample.get("qa", ())):
            evidence = clean_evidence(qa.get("evidence") or (), turn_ids)
            if not evidence:
                continue  # a few category-3 items name no evidence: nothing to find
            questions.append(
                LocomoQuestion(
                    question_id=f"{sample_id}/q{index}",
                    question=str(qa["question"]),
                    category=int(qa["category"]),
                    evidence=tuple(f"{sample_id}/{e}" for e in evidence),
                )
            )
        conversations.append(
            LocomoConversation(sample_id, scope, tuple(records), tuple(questions), last_date)
        )
    return tuple(conversations)


def load_locomo(path: str | Path) -> tuple[LocomoConversation, ...]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise RemoteMemoryValidationError(f"LoCoMo data not found: {path}") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise RemoteMemoryValidationError(f"LoCoMo data is not JSON: {path}: {exc}") from None
    return parse_locomo(data)


class ConversationIndex:
    """One conversation's records, each tokenized once: ``scan(query)`` answers exactly
    what ``scan_recall_candidates(query, records)`` answers."""

    def __init__(self, records: Sequence[StoredMemory]) -> None:
        stopwords = english_stopwords()
        self.records = tuple(records)
        self._terms: list[tuple[str, ...]] = []
        self.token_count = self.content_token_count = 0
        for record in self.records:
            tokens = tokenize_all(searchable_text(record))
            self.token_count += len(tokens)
            self.content_token_count += sum(1 for t in tokens if t not in stopwords)
            self._terms.append(tuple(sorted(set(tokens))))

    def scan(self, query: RecallQuery) -> CandidateScan:
        candidates: list[RecallCandidate] = []
        for record, terms in zip(self.records, self._terms, strict=True):
            if record.user_scope != query.user_scope:
                raise RemoteMemoryValidationError("record of another scope in a LoCoMo index")
            candidate = make_candidate(query, record, terms)
            if candidate is not None:
                candidates.append(candidate)
        return CandidateScan(
            candidates=tuple(candidates),
            searched_records=len(self.records),
            candidate_records=len(candidates),
            retracted_records=0,
            searched_token_count=self.token_count,
            searched_content_token_count=self.content_token_count,
        )


class ConversationVectors:
    """One conversation as a store with vectors shows it to a ``DenseScoring`` ranker:
    an ``InvertedIndex`` of its records and each record's content embedded once (with
    the turn before it, for a pair embedder: what a store of pair vectors keeps)."""

    def __init__(self, records: Sequence[StoredMemory], embedder: Any) -> None:
        self.records = {r.memory_id: r for r in records}
        self.index = InvertedIndex()
        self.index.add_many(records)
        self.ids = [r.memory_id for r in records]
        self.embedder = embedder
        texts = [r.content for r in records]
        if embedder.pairs:  # as a store of pairs embeds them
            kept, texts, _ = pair_texts(self, records)
            assert len(kept) == len(records)  # every turn of a conversation is searched
        self.matrix = embedder.encode(texts)

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        """Each record's turn before and after it in its source (``stores.sources``)."""
        return {m: SourceNeighbours(*pair) for m, pair in self.index.neighbours(memory_ids).items()}

    def postings(self, query: RecallQuery, terms: Sequence[str]) -> Any:
        ids = self.index.ids
        return lexical_from_index(
            self.index, query, terms, lambda docs: [self.records[ids[d]] for d in docs]
        )

    def dense(self, query: RecallQuery, vector: Any, *, model: str, dimension: int) -> DenseScores:
        return DenseScores(self.ids, self.matrix @ vector, 0, vector_of=self.matrix.__getitem__)

    def fetch(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        return [self.records[m] for m in memory_ids]

    records_by_id = fetch  # what pair_texts reads the turns before with


def rank_hits(
    ranker: Ranker,
    index: ConversationIndex | ConversationVectors,
    conversation: LocomoConversation,
    question: LocomoQuestion,
    k: int,
) -> tuple[RecallHit, ...]:
    """The top ``k`` hits of one question, through memlib's stages. ``conversation`` (the
    scope and ``as_of``) is the one ``index`` holds, not always the question's own."""
    query = normalize_recall_query(
        question.question,
        user_scope=conversation.user_scope,
        limit=min(k, LIMIT_MAX),
        query_id=question.question_id,
        issued_at=conversation.as_of,
    )
    if isinstance(index, ConversationVectors) and isinstance(ranker, DenseScoring):
        scan, chosen, _ = ranker.score_stored(
            query,
            index.postings,
            index.dense,
            index.fetch,
            embedder=index.embedder,
            as_of=conversation.as_of,
            limit=k,
            neighbours=index.source_neighbours,
        )
        scored = [(scan.candidates[i], breakdown) for i, breakdown in chosen]
    else:
        assert isinstance(index, ConversationIndex)
        scan = index.scan(query)
        breakdowns = ranker.score_candidates(query, scan, as_of=conversation.as_of)
        scored = list(zip(scan.candidates, breakdowns, strict=True))
    return rank_scored_candidates(query, scored, limit=k)


def rank_question(
    ranker: Ranker,
    index: ConversationIndex | ConversationVectors,
    conversation: LocomoConversation,
    question: LocomoQuestion,
    k: int,
) -> tuple[str, ...]:
    """The memory ids of the top ``k`` records for one question, through memlib's stages."""
    return tuple(hit.memory_id for hit in rank_hits(ranker, index, conversation, question, k))


Row = tuple[int, tuple[str, ...], tuple[str, ...]]  # category, evidence, ranked ids


def question_recall(row: Row, k: int) -> float:
    """One question's R@k: the share of its evidence in its top ``k``."""
    _, evidence, ranked = row
    return len(set(evidence) & set(ranked[:k])) / len(evidence)


def session_of(memory_id: str) -> str:
    """``conv-26/D3:12`` → ``D3``: the session of a turn."""
    return memory_id.rsplit("/", 1)[-1].split(":", 1)[0]


def _metrics(rows: list[Row], ks: Sequence[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    n = len(rows)
    for k in ks:
        sums = dict.fromkeys(("R", "H", "Sany", "Sall"), 0.0)
        for row in rows:
            share = question_recall(row, k)
            wanted = {session_of(e) for e in row[1]}
            reached = wanted & {session_of(m) for m in row[2][:k]}
            sums["R"] += share
            sums["H"] += 1.0 if share else 0.0
            sums["Sany"] += 1.0 if reached else 0.0
            sums["Sall"] += 1.0 if reached == wanted else 0.0
        for name, total in sums.items():
            out[f"{name}@{k}"] = round(total / n, 4) if n else 0.0
    out["n"] = n
    return out


def conversation_rows(
    conversation: LocomoConversation,
    ranker: Ranker,
    *,
    depth: int,
    stored_vectors: bool = True,
    progress: Callable[[int], None] | None = None,
) -> list[Row]:
    """``(category, evidence, ranked ids)`` of each of one conversation's questions."""
    index: ConversationIndex | ConversationVectors
    if stored_vectors and isinstance(ranker, DenseScoring):
        index = ConversationVectors(conversation.records, ranker.model)  # type: ignore[attr-defined]
    else:
        index = ConversationIndex(conversation.records)
    rows: list[Row] = []
    for question in conversation.questions:
        ranked = rank_question(ranker, index, conversation, question, depth)
        rows.append((question.category, question.evidence, ranked))
        if progress is not None:
            progress(1)
    return rows


def evaluate_ranker(
    conversations: Sequence[LocomoConversation],
    ranker: str | Ranker,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    progress: Callable[[int], None] | None = None,
    stored_vectors: bool = True,
) -> dict[str, Any]:
    """One ranker's report: ``{"overall", "by_category", "category_5", "categories_1_5",
    "questions"}``. A ``DenseScoring`` ranker scores as on a store with vectors unless
    ``stored_vectors`` is False: then over the lexical candidates alone."""
    ranker_obj, depth = get_ranker(ranker), max(ks)
    rows: list[Row] = []
    for conversation in conversations:
        rows += conversation_rows(
            conversation, ranker_obj, depth=depth, stored_vectors=stored_vectors, progress=progress
        )
    headline = [r for r in rows if r[0] in HEADLINE_CATEGORIES]
    return {
        "overall": _metrics(headline, ks),
        "by_category": {
            str(c): _metrics([r for r in rows if r[0] == c], ks) for c in HEADLINE_CATEGORIES
        },
        "category_5": _metrics([r for r in rows if r[0] == 5], ks),
        "categories_1_5": _metrics([r for r in rows if r[0] in CATEGORY_NAMES], ks),
        "questions": len(headline),
    }


def format_table(report: Mapping[str, Mapping[str, Any]], ks: Sequence[int] = DEFAULT_KS) -> str:
    """Plain-text tables: overall (categories 1–4), per category, and category 5 apart;
    turn level (R, H) then session level (Sany, Sall)."""
    columns = [f"{m}@{k}" for m in ("R", "H", "Sany", "Sall") for k in ks]
    wide = {c: max(6, len(c)) for c in columns}  # Sall@10: 7
    width = max([len("ranker"), *(len(n) for n in report)])
    blocks: list[tuple[str, str, str | None]] = [("overall (categories 1-4)", "overall", None)]
    blocks += [
        (f"category {c} ({CATEGORY_NAMES[c]})", "by_category", str(c)) for c in HEADLINE_CATEGORIES
    ]
    blocks += [("category 5 (adversarial, not in overall)", "category_5", None)]
    blocks += [("categories 1-5 (as peers count)", "categories_1_5", None)]
    head = "  ".join(f"{c:>{wide[c]}}" for c in columns)
    lines: list[str] = []
    for title, key, category in blocks:
        lines += ["", title] if lines else [title]
        lines.append(f"{'ranker':<{width}}  {'n':>4}  {head}")
        for name, rep in report.items():
            m = rep[key] if category is None else rep[key][category]
            cells = "  ".join(f"{m[c]:>{wide[c]}.3f}" for c in columns)
            lines.append(f"{name:<{width}}  {m['n']:>4}  {cells}")
    return "\n".join(lines)

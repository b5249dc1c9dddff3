"""Exercises of ``06_hits_and_tool_result.ipynb``."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Mapping
from typing import Any

from ...sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store
from ..views import recall
from . import Exercise, Verdict, right, wrong
from ._common import as_function, sample_store, shape_error

FIELD_QUERY_ID = "nb-06-fields"
QUESTIONS = ("whose", "when", "recency added", "which recall")
LABELS = ("hits", "no match", "empty corpus")
# The zh edition's names of the payloads of 06.2 (the queries themselves stay as typed).
_PAYLOAD_ZH = {
    "“backend engineer” (profile words)": "“backend engineer”（用户画像中的词）",
    "empty-store": "空存储",
}
_MISSING = object()


def _hit() -> tuple[dict[str, Any], dict[str, Any]]:
    """The top hit of the notebook's query, as JSON has it, and what each question asks for."""
    result = recall(sample_store(), SAMPLE_QUERY, SAMPLE_AS_OF, 1, query_id=FIELD_QUERY_ID)
    hit = result.hits[0]
    wanted = {
        "whose": sample_store().user_scope,
        "when": hit.provenance.captured_at,
        "recency added": hit.score_breakdown.recency_contribution,
        "which recall": result.query.query_id,
    }
    return result.to_dict()["hits"][0], wanted


def _resolve(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _field(question: str, path: str, hit: Mapping[str, Any], wanted: Any) -> tuple[str, str] | None:
    """Why ``path`` does not answer ``question``, in English and Chinese (None when it does)."""
    if path.startswith("query."):
        return (
            f"{path} is in the payload's query object, not in the hit: each hit carries "
            "its own fields",
            f"{path} 在工具结果的 query 对象里，不在命中里：每个命中都带着自己的字段",
        )
    value = _resolve(hit, path)
    if value is _MISSING:
        if "stored_at" in path:
            return (
                "a hit carries no stored_at: when the event happened is its captured_at, "
                "in the provenance",
                "命中不带 stored_at：事件发生的时间是 provenance 中的 captured_at",
            )
        return (
            f"{path!r} is not a field of a hit: use the dotted names of the field table "
            "above (e.g. provenance.title)",
            f"{path!r} 不是命中的字段：请使用上面字段表中带点的名称（例如 provenance.title）",
        )
    if value == wanted and path.startswith("source."):
        return (
            "source.* is the compatibility copy kept for older callers: the field to read "
            "is in provenance",
            "source.* 是为旧调用方保留的兼容副本：该读的字段在 provenance 里",
        )
    if value == wanted:
        return None
    if path == "score_breakdown.recency":
        return (
            "that is recency itself, a factor between 0 and 1 before its weight: what it "
            "added to the total is its contribution",
            "这是新近度本身，一个乘以权重之前、介于 0 和 1 之间的因子："
            "它给总分加了多少，是它的贡献",
        )
    if path == "score_breakdown.weights.recency":
        return (
            "that is recency's weight (0.15), the same for every hit: what did it add here?",
            "这是新近度的权重（0.15），每个命中都一样：它在这里加了多少？",
        )
    return (
        f"{path} holds {value!r}: that does not answer “{question}”",
        f"{path} 的值是 {value!r}：它回答不了“{question}”",
    )


def _which_field(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping):
        raise shape_error(
            "the answer should be a dict from each question to a dotted field name",
            "答案应是一个 dict：每个问题对应一个带点的字段名",
        )
    missing = [q for q in QUESTIONS if q not in answer]
    if missing:
        return wrong(
            f"the answer needs the keys {', '.join(map(repr, QUESTIONS))}; "
            f"missing: {', '.join(map(repr, missing))}",
            zh=f"答案需要这些键：{', '.join(map(repr, QUESTIONS))}；"
            f"缺少：{', '.join(map(repr, missing))}",
        )
    hit, wanted = _hit()
    for question in QUESTIONS:
        path = answer[question]
        if not isinstance(path, str):
            return wrong(
                f"“{question}”: give the field's dotted name as a string",
                zh=f"“{question}”：请用字符串给出字段的带点名称",
            )
        for prefix in ("hits[0].", "hits.0.", "hit."):
            path = path.removeprefix(prefix)
        problem = _field(question, path.strip(), hit, wanted[question])
        if problem is not None:
            return wrong(f"“{question}”: {problem[0]}", zh=f"“{question}”：{problem[1]}")
    return right(
        "scope says whose, provenance when and from where, the breakdown why, and "
        "query_id which recall the hit belongs to",
        zh="scope 说明是谁的，provenance 说明何时、从哪里来，评分明细说明为什么，"
        "query_id 说明命中属于哪一次召回",
    )


@functools.cache
def _payloads() -> dict[str, str]:
    """One tool result of each kind, from the library: hits, no shared term, an empty corpus."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        empty = recall(open_sample_store(root, load=False), SAMPLE_QUERY, SAMPLE_AS_OF, 5)
    queries = {
        "“layered memory”": SAMPLE_QUERY,
        "“kubernetes autoscaling”": "kubernetes autoscaling",
        "“backend engineer” (profile words)": "backend engineer",
    }
    results = {name: recall(sample_store(), q, SAMPLE_AS_OF, 5) for name, q in queries.items()}
    return {name: result.to_json() for name, result in {**results, "empty-store": empty}.items()}


def _expected(payload: str) -> str:
    data = json.loads(payload)
    if data["hits"]:
        return "hits"
    return "empty corpus" if data["searched_records"] == 0 else "no match"


def _classify(answer: Any) -> Verdict:
    classify = as_function(answer, "takes the JSON payload (a str)", "接收 JSON 载荷（一个 str）")
    for name, payload in _payloads().items():
        name_zh = _PAYLOAD_ZH.get(name, name)
        try:
            got = classify(payload)
        except (TypeError, KeyError, IndexError, AttributeError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            reason_zh = f"{type(exc).__name__}：“{exc}”"
            if isinstance(exc, (TypeError, AttributeError)) and "str" in str(exc):
                reason += " — the payload is JSON text: json.loads(payload) gives the dict"
                reason_zh += "——载荷是 JSON 文本：json.loads(payload) 才得到 dict"
            return wrong(
                f"on the {name} payload your function raised {reason}",
                zh=f"对{name_zh}的载荷，你的函数抛出了 {reason_zh}",
            )
        want = _expected(payload)
        if got not in LABELS:
            return wrong(
                f"on the {name} payload your function returned {got!r}: return one of "
                f"{', '.join(map(repr, LABELS))}",
                zh=f"对{name_zh}的载荷，你的函数返回了 {got!r}：请返回 "
                f"{', '.join(map(repr, LABELS))} 之一",
            )
        if got == want:
            continue
        if want == "hits":
            return wrong(
                f"the {name} payload has hits: it is not empty at all",
                zh=f"{name_zh}的载荷有命中：它根本不是空的",
            )
        if want == "empty corpus":
            return wrong(
                f"the {name} payload says {got!r}, but nothing was searched: "
                "empty_reason and candidate_records are the same as for a query that "
                "matched nothing — searched_records tells them apart",
                zh=f"{name_zh}的载荷被判为 {got!r}，但它什么也没检索："
                "empty_reason 和 candidate_records 与一个什么都没匹配上的查询完全相同"
                "——区分二者的是 searched_records",
            )
        return wrong(
            f"the {name} payload searched records and found no shared term: "
            f"{got!r} is wrong — searched_records > 0 means there was a corpus",
            zh=f"{name_zh}的载荷检索了记录，但没有共同词项：{got!r} 不对——"
            "searched_records > 0 说明有语料",
        )
    return right(
        "hits first; with none, searched_records = 0 means an empty corpus and "
        "> 0 a query that matched nothing",
        zh="先看命中；没有命中时，searched_records = 0 表示语料为空，> 0 表示查询什么都没匹配上",
    )


# 06.1's answer, of which each wrong answer below changes one field.
_FIELDS = {
    "whose": "scope.user_scope",
    "when": "provenance.captured_at",
    "recency added": "score_breakdown.contributions.recency",
    "which recall": "query_id",
}

Exercise(
    id="06.1",
    title="which field of a hit answers which question",
    grade=_which_field,
    hints=(
        "The field table above lists every field of a hit by its dotted name, in groups: "
        "query_id, scope.*, provenance.*, source.*, score_breakdown.*.",
        "source.* and score are compatibility copies; answer with the fields they copy.",
        "recency is a number between 0 and 1; what it added to the total is weighted.",
    ),
    hints_zh=(
        "上面的字段表按组列出了命中的每个字段及其带点的名称："
        "query_id、scope.*、provenance.*、source.*、score_breakdown.*。",
        "source.* 和 score 是兼容副本；请用它们所复制的那些字段作答。",
        "recency 是介于 0 和 1 之间的数；它给总分加的那部分乘过权重。",
    ),
    solution=(
        "# Exercise 06.1 — solution\nanswer = {\n"
        '    "whose": "scope.user_scope",\n'
        '    "when": "provenance.captured_at",\n'
        '    "recency added": "score_breakdown.contributions.recency",\n'
        '    "which recall": "query_id",\n'
        "}"
    ),
    wrong_answers=(
        ({**_FIELDS, "when": "source.captured_at"}, "compatibility copy"),
        ({**_FIELDS, "recency added": "score_breakdown.recency"}, "before its weight"),
        ({**_FIELDS, "whose": "query.user_scope"}, "not in the hit"),
        ({**_FIELDS, "which recall": "memory_id"}, "does not answer"),
        ({"whose": "scope.user_scope", "when": "stored_at"}, "needs the keys"),
        ("provenance.captured_at", "should be a dict"),
    ),
).register()

Exercise(
    id="06.2",
    title="tell hits, a query that matched nothing and an empty corpus apart",
    grade=_classify,
    hints=(
        "The function gets the JSON text: json.loads(payload) gives the dict of the outline "
        "above (query, hits, searched_records, candidate_records, retracted_records, "
        "empty_reason).",
        "With no hits, empty_reason is “no_matching_terms” in both empty cases, and "
        "candidate_records is 0 in both: which count differs?",
        "searched_records = 0: there was nothing to search.",
    ),
    hints_zh=(
        "函数拿到的是 JSON 文本：json.loads(payload) 得到上面概要中的 dict"
        "（query、hits、searched_records、candidate_records、retracted_records、"
        "empty_reason）。",
        "没有命中时，两种空结果的 empty_reason 都是“no_matching_terms”，"
        "candidate_records 也都是 0：哪个计数不同？",
        "searched_records = 0：没有可检索的东西。",
    ),
    solution=(
        "# Exercise 06.2 — solution\n"
        "def kind_of_result(payload):\n"
        "    data = json.loads(payload)\n"
        '    if data["hits"]:\n'
        '        return "hits"\n'
        '    return "empty corpus" if data["searched_records"] == 0 else "no match"\n'
        "\n\n"
        "answer = kind_of_result"
    ),
    wrong_answers=(
        (lambda p: "hits" if json.loads(p)["hits"] else "no match", "searched_records tells"),
        (
            lambda p: "empty corpus" if json.loads(p)["candidate_records"] == 0 else "hits",
            "there was a corpus",
        ),
        (lambda p: json.loads(p)["empty_reason"], "return one of"),
        (lambda p: p["hits"], "json.loads"),
        ("no match", "should be a function"),
    ),
).register()

"""A deterministic scripted model behind the real ``anthropic`` client (offline).

``ScriptedModel`` is an ``httpx2.MockTransport`` handler that checks each request as the
Messages API would, so ``agent_loop`` runs through the same SDK code offline as online.
It recalls the question minus filler words, then answers from the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx2

from .tools import DEFAULT_LIMIT, RECALL_HISTORY, STORE_ERROR_PREFIX

SCRIPTED_MODEL_ID = "memlib-scripted"
SCRIPTED_API_KEY = "offline-scripted-no-key"
_BASE_URL = "https://api.anthropic.com"

# Words that say "look it up" but name no topic. What is left is the topic.
_FILLER = frozenset(
    """
    a about again all also an and any are as at be before can continue could decide decided
    did discuss discussed do does earlier for from get go had have how i in is it last left
    let me my of off on or our pick please previously recall remember remind said say s so
    talk talked tell that the there thing things this time to up us was we went were what
    when where which who why with would you
    """.split()  # noqa: SIM905 (a word list reads better as prose)
)
_WORD = re.compile(r"\w+")


def derive_query(text: str) -> str:
    """The topic words of a user question, in order ("" when only filler is left)."""
    return " ".join(w for w in _WORD.findall(text) if w.casefold() not in _FILLER)


class _Invalid(Exception):
    pass


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _Invalid("message content must be a string or a list of blocks")
    return content


def _check(body: Any) -> None:
    """The Messages API's own request rules that a tool loop can break."""
    if not isinstance(body, dict):
        raise _Invalid("the request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _Invalid("model: field required")
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        raise _Invalid("max_tokens: must be a positive integer")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Invalid("messages: at least one message is required")
    names = [tool.get("name") for tool in body.get("tools") or []]
    if len(names) != len(set(names)):
        raise _Invalid("tools: tool names must be unique")
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        expected = "user" if index % 2 == 0 else "assistant"
        if message.get("role") != expected:
            raise _Invalid(f"messages.{index}.role: roles must alternate, starting with user")
        blocks = _blocks(message)
        if expected == "assistant":
            previous_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            for b in blocks:
                if b.get("type") == "tool_use" and b.get("name") not in names:
                    raise _Invalid(f"messages.{index}: tool_use of unknown tool {b.get('name')!r}")
            continue
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        for tool_use_id in answered:
            if tool_use_id not in previous_uses:
                raise _Invalid(
                    f"messages.{index}: unexpected tool_use_id {tool_use_id!r} in tool_result "
                    "blocks: each tool_result must answer a tool_use of the previous message"
                )
        missing = sorted(previous_uses - set(answered))
        if missing:
            raise _Invalid(
                f"messages.{index}: tool_use ids without a tool_result: {', '.join(missing)}"
            )
        previous_uses = set()
    if messages[-1]["role"] != "user":
        raise _Invalid("the last message must have the user role")


class ScriptedModel:
    """The handler of an ``httpx2.MockTransport``: a deterministic Messages API.

    ``queries`` is the plan for each user question: one entry per ``recall_history`` call,
    ``None`` meaning "derived from the question". ``("!!!", None)`` first sends a query the
    contract refuses, then a good one. Every request body is kept in ``requests``.
    """

    answer_hits = 3  # hits quoted in an answer

    def __init__(self, queries: Sequence[str | None] = (None,), *, limit: int = DEFAULT_LIMIT):
        self.queries = tuple(queries)
        self.limit = limit
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            return _error(404, f"no route {request.method} {request.url.path}", _REQUEST_ID)
        try:
            body = json.loads(request.content)
        except ValueError:
            return _error(400, "the request body is not JSON", _REQUEST_ID)
        self.requests.append(body)
        try:
            _check(body)
        except _Invalid as exc:
            return _error(400, str(exc), _REQUEST_ID)
        return httpx2.Response(200, json=self.respond(body), headers=_REQUEST_ID)

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The response to one valid request body (a pure function of the body)."""
        messages = body["messages"]
        step = len(messages)
        question, calls, results = self._since_last_question(messages)
        if RECALL_HISTORY not in [tool.get("name") for tool in body.get("tools") or []]:
            return _message(step, _NO_TOOL, body)
        if calls < len(self.queries):
            planned = self.queries[calls]
            query = derive_query(question) if planned is None else planned
            if planned is None and not query:
                return _message(step, _WHICH_TOPIC, body)
            tool_use = {
                "type": "tool_use",
                "id": f"toolu_scripted_{step:03d}",
                "name": RECALL_HISTORY,
                "input": {"query": query, "limit": self.limit},
            }
            return _message(step, tool_use, body)
        return _message(step, self._answer(results[-1] if results else None), body)

    @staticmethod
    def _since_last_question(
        messages: list[dict[str, Any]],
    ) -> tuple[str, int, list[dict[str, Any]]]:
        question, start = "", 0
        for index, message in enumerate(messages):
            if message["role"] != "user":
                continue
            texts = [b.get("text", "") for b in _blocks(message) if b.get("type") == "text"]
            if texts:
                question, start = " ".join(texts), index
        blocks = [block for message in messages[start + 1 :] for block in _blocks(message)]
        calls = sum(block.get("type") == "tool_use" for block in blocks)
        return question, calls, [block for block in blocks if block.get("type") == "tool_result"]

    def _answer(self, result: dict[str, Any] | None) -> str:
        if result is None:
            return "I did not get a recall result, so I cannot say what we discussed."
        content = result.get("content")
        if not isinstance(content, str):
            content = "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
        if result.get("is_error") and content.startswith(STORE_ERROR_PREFIX):
            reason = content.removeprefix(STORE_ERROR_PREFIX)
            failed = "I could not look up our earlier conversations: the memory store failed"
            return f"{failed} ({reason})."
        if result.get("is_error"):
            return (
                f"The recall service refused my query ({content}), "
                "so I cannot say what we discussed."
            )
        data = json.loads(content)
        query = data["query"]["text"]
        hits = data["hits"]
        if not hits and not data["searched_records"]:
            return (
                f'I found nothing about "{query}": this user has no stored conversation '
                "records yet."
            )
        if not hits:
            return (
                f'I found nothing about "{query}" in our earlier conversations '
                f"(searched {data['searched_records']} records, none shared a term)."
            )
        lines = [f'From our earlier conversations about "{query}":']
        for hit in hits[: self.answer_hits]:
            p = hit["provenance"]
            lines.append(
                f"{hit['rank']}. {hit['snippet']} [{hit['memory_id']}, "
                f'"{p["title"]}", {p["captured_at"][:10]}]'
            )
        if len(hits) > self.answer_hits:
            lines.append(f"({len(hits) - self.answer_hits} more hit(s) were less relevant.)")
        return "\n".join(lines)


_NO_TOOL = (
    "I have no recall_history tool in this session, so I cannot look up our earlier conversations."
)
_WHICH_TOPIC = (
    "Which topic should I look up? The recall service cannot see our chat, so I need the "
    "topic in words (for example: layered memory design)."
)


def _message(step: int, answer: str | dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API response: ``answer`` as a text block (end_turn) or a tool_use."""
    text = isinstance(answer, str)
    content = [{"type": "text", "text": answer} if text else answer]
    return {
        "id": f"msg_scripted_{step:03d}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "end_turn" if text else "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(json.dumps(body, ensure_ascii=False)) // 4,
            "output_tokens": len(json.dumps(content, ensure_ascii=False)) // 4,
        },
    }


def scripted_client(model: ScriptedModel | None = None) -> Any:
    """A real ``anthropic.Anthropic`` whose HTTP transport is the scripted model."""
    return _client(model if model is not None else ScriptedModel(), SCRIPTED_API_KEY, 0)


def _client(handler: Any, api_key: str, max_retries: int) -> Any:
    """The real SDK client, its HTTP answered by ``handler`` (an ``httpx2`` handler)."""
    import anthropic

    return anthropic.Anthropic(
        api_key=api_key,
        base_url=_BASE_URL,
        max_retries=max_retries,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


# The error type the real API names in the body of each status (what the SDK reads).
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


_REQUEST_ID = {"request-id": "req_scripted"}


def _error(status: int, message: str, headers: dict[str, str]) -> httpx2.Response:
    body = {"type": "error", "error": {"type": _ERROR_TYPES[status], "message": message}}
    return httpx2.Response(status, json=body, headers=headers)


class FlakyAPI:
    """A scripted Messages API that fails first: each of ``failures`` (an HTTP status, or
    ``"timeout"``) answers one request, then ``model`` answers the rest. Each failure asks
    for a 1 ms ``retry-after``; an error body echoes the key it was sent, as a careless
    server might, so a caller can check that it reaches no message.
    """

    def __init__(self, *failures: int | str, model: ScriptedModel | None = None) -> None:
        unknown = [f for f in failures if f != "timeout" and f not in _ERROR_TYPES]
        if unknown:
            raise ValueError(
                f"FlakyAPI cannot send {unknown[0]!r}: a status of "
                f"{sorted(_ERROR_TYPES)} or 'timeout'"
            )
        self.failures = list(failures)
        self.model = model if model is not None else ScriptedModel()
        self.sent = 0
        self.failed = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent += 1
        if not self.failures:
            return self.model(request)
        failure = self.failures.pop(0)
        self.failed += 1
        if failure == "timeout":
            raise httpx2.ReadTimeout("scripted timeout", request=request)
        key = request.headers.get("x-api-key", "")
        return _error(int(failure), f"scripted {failure}, key {key}", {"retry-after-ms": "1"})

    def client(self, *, api_key: str = SCRIPTED_API_KEY, max_retries: int = 2) -> Any:
        """A real ``anthropic.Anthropic`` on this transport, retrying as ``runtime_client()``
        does by default (the SDK's two retries)."""
        return _client(self, api_key, max_retries)

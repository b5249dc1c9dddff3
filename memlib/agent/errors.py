"""Errors of the agent boundary (docs/reference.md "The agent boundary", "Errors").

Everything the loop raises on purpose is a ``RemoteMemoryError`` (one line in the CLI). An
API failure becomes one sentence that says what to do: never the SDK's own text, which can
echo request details, and never a secret (``[redacted]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import RemoteMemoryError


class AgentError(RemoteMemoryError):
    """The agent loop could not finish."""


class ModelAPIError(AgentError):
    """The Messages API call failed: one clear sentence, no key, no SDK dump."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        reason: str = "api_error",
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.reason = reason
        self.request_id = request_id


class AgentTurnLimitError(AgentError):
    """The model was still calling tools when ``max_turns`` requests had been made."""

    def __init__(self, message: str, *, transcript: Any = None) -> None:
        super().__init__(message)
        self.transcript = transcript


def explain_api_error(
    exc: BaseException, *, model: str | None = None, secrets: Iterable[str | None] = ()
) -> ModelAPIError:
    """Map an ``anthropic`` exception to a ``ModelAPIError`` with one sentence."""
    import anthropic  # only ever called after the SDK raised, so it is loaded already

    status = getattr(exc, "status_code", None)
    request_id = getattr(exc, "request_id", None)
    model_text = f"model {model!r}" if model else "the model"

    if isinstance(exc, anthropic.APITimeoutError):
        reason, message = (
            "timeout",
            "the Anthropic API did not answer in time (timeout); check the network and try again",
        )
    elif isinstance(exc, anthropic.APIConnectionError):
        reason = "connection"
        message = (
            "could not connect to the Anthropic API (connection error); "
            "check the network or proxy settings"
        )
    elif isinstance(exc, anthropic.AuthenticationError):
        reason, message = (
            "authentication",
            "the Anthropic API rejected the API key (HTTP 401); check ANTHROPIC_API_KEY",
        )
    elif isinstance(exc, anthropic.PermissionDeniedError):
        reason, message = (
            "permission",
            f"the API key may not use {model_text} (HTTP 403); check the key's permissions",
        )
    elif isinstance(exc, anthropic.NotFoundError):
        reason, message = (
            "not_found",
            f"the Anthropic API does not know {model_text} (HTTP 404); check MODEL_ID",
        )
    elif isinstance(exc, anthropic.RateLimitError):
        reason, message = (
            "rate_limit",
            "the Anthropic API rate limit was reached (HTTP 429); wait a moment and try again",
        )
    elif status == 529:
        reason, message = (
            "overloaded",
            "the Anthropic API is overloaded right now (HTTP 529); try again in a minute",
        )
    elif isinstance(exc, anthropic.InternalServerError):
        reason, message = (
            "server",
            f"the Anthropic API failed with a server error (HTTP {status}); try again later",
        )
    elif isinstance(exc, anthropic.APIStatusError):
        detail = getattr(exc, "api_message", None)
        reason = "bad_request" if status == 400 else "status"
        message = f"the Anthropic API refused the request (HTTP {status})"
        if detail:
            message += f": {' '.join(str(detail).split())}"
    elif isinstance(exc, anthropic.APIResponseValidationError):
        reason, message = "bad_response", "the Anthropic API sent a response the SDK could not read"
    else:
        reason, message = "api_error", f"the Anthropic API call failed ({type(exc).__name__})"
    for secret in secrets:  # a secret that still reaches the message
        if secret and len(secret) >= 4:
            message = message.replace(secret, "[redacted]")
    return ModelAPIError(message, status_code=status, reason=reason, request_id=request_id)

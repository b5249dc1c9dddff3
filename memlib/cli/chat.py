"""``memlib chat``: the agent loop from the command line, interactive or one ``--message``.
Online and offline (``--scripted``) share ``agent_loop`` with an ``anthropic.Anthropic``
client; only its HTTP transport differs. Nothing heavy is imported until ``chat`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from typing import Any

from ._common import CliError, int_arg, open_cli_store, parse_as_of, write_error, write_line

__all__ = ["SCRIPTED_DEFAULT_MESSAGE", "SCRIPTED_QUERY_PREFIX", "cmd_chat", "register"]

SCRIPTED_DEFAULT_MESSAGE = "What did we decide about the layered memory design?"
SCRIPTED_QUERY_PREFIX = "chat-query"
QUIT_WORDS = ("/quit", "/exit")


_positive = int_arg("not an integer: {text!r}", 1, out_of_range="must be at least 1: {value}")


def register(subparsers: Any) -> None:
    chat = subparsers.add_parser(
        "chat",
        help="talk to a model that can call recall_history (online; --scripted for offline)",
        description=(
            "Chat with a model that has the recall_history tool. Online it needs MODEL_ID and "
            "ANTHROPIC_API_KEY. With --scripted a deterministic offline model answers through the "
            "same Anthropic SDK and loop, on the sample corpus unless --store or --user is given."
        ),
    )
    chat.add_argument(
        "--scripted",
        action="store_true",
        help="offline deterministic scripted model (no key, no network)",
    )
    chat.add_argument(
        "--message",
        "-m",
        help="one user message, then exit (default with --scripted: a fixed question)",
    )
    chat.add_argument(
        "--as-of",
        help="ISO-8601 instant for every recall "
        "(default: the sample corpus's fixed instant with the sample, else now)",
    )
    chat.add_argument(
        "--sample",
        action="store_true",
        help="use the sample corpus in a temporary store (default with --scripted "
        "when neither --store nor --user is given)",
    )
    chat.add_argument(
        "--max-turns", type=_positive, help="model requests allowed per user message (default 6)"
    )
    chat.add_argument("--max-tokens", type=_positive, default=1024)
    chat.add_argument(
        "--min-score",
        help="every recall_history call drops hits under this "
        "floor: a number or 'suggested' (default: $MEMLIB_MIN_SCORE, else none)",
    )
    chat.set_defaults(func=cmd_chat)


def _write(text: str) -> None:
    # The model's words can quote what the store holds: visible text, like every command.
    write_line(text)
    sys.stdout.flush()


def cmd_chat(args: argparse.Namespace) -> int:
    # Looked up at call time: tests swap runtime.runtime_client for a fake transport.
    from .. import _runtime as runtime
    from ..agent.loop import DEFAULT_MAX_TURNS, agent_loop
    from ..agent.prompt import build_system_prompt
    from ..agent.scripted import SCRIPTED_MODEL_ID, scripted_client
    from ..engine import RecallEngine
    from ..sample import SAMPLE_AS_OF, open_sample_store
    from ..stores._base import MemoryStore

    if args.message is not None and not args.message.strip():
        raise CliError("--message must not be empty")
    as_of = parse_as_of(args.as_of)
    use_sample = args.sample or (args.scripted and not args.store and not args.user)

    if args.scripted:
        client, model, prefix = scripted_client(), SCRIPTED_MODEL_ID, SCRIPTED_QUERY_PREFIX
    else:
        client = runtime.runtime_client()  # fails here, naming the missing variable
        model, prefix = os.environ["MODEL_ID"], None

    with ExitStack() as stack:
        if use_sample:
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="memlib-chat-"))
            store: MemoryStore = open_sample_store(root)
            as_of = as_of or SAMPLE_AS_OF
        else:
            store = open_cli_store(args)
        stack.callback(store.close)
        system = build_system_prompt(store)
        floor = args.min_score or os.environ.get("MEMLIB_MIN_SCORE") or None
        options: dict[str, Any] = {
            "client": client,
            "model": model,
            "engine": RecallEngine(store, min_score=floor),
            "as_of": as_of,
            "system": system,
            "max_turns": args.max_turns or DEFAULT_MAX_TURNS,
            "max_tokens": args.max_tokens,
            "query_id_prefix": prefix,
        }
        message = args.message or (SCRIPTED_DEFAULT_MESSAGE if args.scripted else None)
        if message is None:
            return _interactive(options, model=model, system=system)
        _write(agent_loop(message, **options).format())
        return 0


def _interactive(options: dict[str, Any], *, model: str, system: str) -> int:
    from ..agent.errors import AgentError, ModelAPIError
    from ..agent.loop import TranscriptEntry, agent_loop

    def show(entry: TranscriptEntry) -> None:
        if entry.turn == 0:
            return  # the user just typed it
        if entry.block_type == "text":
            _write(f"assistant> {entry.text}")
        elif entry.block_type == "tool_use":
            _write(f"  [tool_use {entry.tool_name} {entry.tool_input_json}]")
        elif entry.block_type == "tool_result":
            _write(f"  [tool_result {entry.result_summary}]")

    _write(f"=== system prompt (built once for this session; model {model}) ===\n{system}")
    _write(f"=== type a message; {' or '.join(QUIT_WORDS)} or an empty line ends the chat ===")
    messages: list[dict[str, Any]] = []
    while True:
        try:
            line = input("you> ")
        except EOFError:
            _write("")
            return 0
        if not line.strip() or line.strip() in QUIT_WORDS:
            return 0
        try:
            transcript = agent_loop(
                [*messages, {"role": "user", "content": line}], on_entry=show, **options
            )
        except AgentError as exc:
            if isinstance(exc, ModelAPIError) and exc.status_code in (401, 403):
                raise  # a rejected key will not fix itself: end the session
            # One failed turn (529, timeout, turn limit) does not end the session: the
            # message is dropped and the user can send it again.
            write_error(f"memlib: error: {exc}")
            continue
        messages = transcript.messages

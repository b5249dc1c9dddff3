"""Study (issue 36): warm hybrid recalls (e5) on hnsw_recall's store, with a profile.

    python benchmarks/hnsw_hybrid.py FOLDER RECORDS
"""
import sys, time, statistics, warnings, cProfile, pstats
warnings.filterwarnings("ignore")
from pathlib import Path
from benchmarks.stores import pgvector_server
from benchmarks.common import USER, progress_log, bench_recall
from benchmarks import corpus
from memlib import RecallEngine
from memlib.stores import open_store
from memlib.rankers.embeddings import get_embedder

log = progress_log(time.monotonic())
server = pgvector_server(Path(sys.argv[1]), log)
n = int(sys.argv[2])
url = f"{server.dsn}{'&' if '?' in server.dsn else '?'}schema=hnsw{n}"
model = get_embedder("e5")
store = open_store(url, user_id=USER, embedder=model)
recall = bench_recall(RecallEngine(store, ranker="hybrid"))
sets = corpus.query_sets(10)
for q in sets["rare"][:3]: recall(q)
for name in ("rare", "common"):
    t = []
    for q in sets[name]:
        s = time.perf_counter(); recall(q); t.append(time.perf_counter() - s)
    print(name, "p50 ms", round(statistics.median(t) * 1000, 1), [round(x*1000) for x in t], flush=True)
pr = cProfile.Profile(); pr.enable()
for q in sets["rare"]: recall(q)
pr.disable()
pstats.Stats(pr).sort_stats("cumtime").print_stats(25)
store.close(); server.stop()

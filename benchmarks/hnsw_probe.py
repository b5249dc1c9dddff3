"""Study (issue 36): recall@10 of the HNSW index against exact over hnsw_recall's own 100
queries, at each ef_search, and the time of hybrid's pool (k = 500).

    python benchmarks/hnsw_probe.py FOLDER RECORDS 100,200,400
"""
import sys, time, statistics, warnings
import numpy as np
warnings.filterwarnings("ignore")
from pathlib import Path
from benchmarks.stores import pgvector_server
from benchmarks.common import USER, BATCH, progress_log
from benchmarks.hnsw_recall import vectors
from memlib.stores import open_store
import memlib.stores.sql._postgres as P

log = progress_log(time.monotonic())
n = int(sys.argv[2])
rng = np.random.default_rng(20261205)
centres = rng.normal(size=(1000, 384)); centres /= np.linalg.norm(centres, axis=1, keepdims=True)
for start in range(0, n, BATCH):  # replay the fill's draws: the study's 100 queries follow
    vectors(min(BATCH, n - start), rng, centres)
qs = vectors(100, rng, centres)
server = pgvector_server(Path(sys.argv[1]), log)
url = f"{server.dsn}{'&' if '?' in server.dsn else '?'}schema=hnsw{n}"
store = open_store(url, user_id=USER)
exact = [list(store._nearest(q, 10, hnsw=False))[:10] for q in qs]
for ef in map(int, sys.argv[3].split(",")):
    P._EF_SEARCH = ef
    found = 0; t = []
    for q, e in zip(qs, exact):
        s = time.perf_counter(); rows = store._nearest(q, 10, hnsw=True); t.append(time.perf_counter() - s)
        found += len(set(list(rows)[:10]) & set(e))
    print(f"ef_search {ef}: recall@10 {found / 1000:.3f}, p50 {statistics.median(t) * 1000:.1f} ms", flush=True)
P._EF_SEARCH = 100
t = []
for q in qs[:30]:
    s = time.perf_counter(); store._nearest(q, 500, hnsw=True); t.append(time.perf_counter() - s)
print(f"k=500 (hybrid's pool): p50 {statistics.median(t) * 1000:.1f} ms", flush=True)
store.close(); server.stop()

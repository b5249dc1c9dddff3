"""Study (issue 36): rebuild the 1M HNSW index of benchmarks.hnsw_recall with ef_construction N.

    python benchmarks/hnsw_rebuild.py FOLDER N   (FOLDER: hnsw_recall's --folder)
"""
import sys, time, warnings
warnings.filterwarnings("ignore")
from pathlib import Path
import psycopg
from benchmarks.stores import pgvector_server
from benchmarks.common import progress_log
import memlib.stores.sql._postgres as P
log = progress_log(time.monotonic())
server = pgvector_server(Path(sys.argv[1]), log)
efc = int(sys.argv[2])
with psycopg.connect(server.dsn, autocommit=True) as conn:
    conn.execute("DROP INDEX IF EXISTS hnsw1000000.vectors_hnsw_384")
    P._fit_graph(conn, "hnsw1000000.", 384)
    print(conn.execute("SHOW maintenance_work_mem").fetchone(), flush=True)
    t = time.perf_counter()
    conn.execute("CREATE INDEX vectors_hnsw_384 ON hnsw1000000.vectors USING hnsw ((embedding::vector(384)) vector_ip_ops) "
                 f"WITH (ef_construction = {efc}) WHERE vector_dims(embedding) = 384")
    print("build s", round(time.perf_counter() - t, 1), flush=True)
server.stop()

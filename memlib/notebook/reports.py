"""The committed reports the notebooks read, copied into ``memlib/data/reports/`` (so they
work wherever the notebooks go): byte for byte, but the benchmark report, of which
:func:`bench_slice` keeps what notebook 12 reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RemoteMemoryError, RemoteMemoryValidationError

RANKERS_DEV_SPLIT = "rankers-dev-split"
ABSTENTION_DEV_SPLIT = "abstention-dev-split"
CROSSVAL_DEV_SPLIT = "crossval-dev-split"
# The same for hybrid on pair vectors (``memlib --embedder e5-pair eval locomo``).
CROSSVAL_PAIRS_DEV_SPLIT = "crossval-pairs-dev-split"
BENCH = "bench"
# The reports packaged as they are in ``reports/``.
_VERBATIM = (RANKERS_DEV_SPLIT, ABSTENTION_DEV_SPLIT, CROSSVAL_DEV_SPLIT, CROSSVAL_PAIRS_DEV_SPLIT)
_KNOWN = (*_VERBATIM, BENCH)
# A full run's report; the partial runs add a suffix (bench-20261201-cold.json).
_FULL_BENCH = re.compile(r"^bench-\d{8}\.json$")

# What notebook 12 reads of a benchmark report: ``True`` keeps a value whole, a mapping
# keeps those keys of it (applied to each element of a list).
_LATENCY: Mapping[str, Any] = {"p50_ms": True, "p95_ms": True}
_WALL: Mapping[str, Any] = {"wall_s": True}
_COLD_RANKER: Mapping[str, Any] = {"jsonl_no_index": _WALL, "jsonl_index": _WALL, "sqlite": _WALL}
_LEXICAL_RANKERS = ("baseline", "bm25", "bm25+stopwords")
BENCH_KEEP: Mapping[str, Any] = {
    "date": True,
    "machine": {"cpu": True, "cores": True},
    "corpus": True,
    "sizes": {
        "n": True,
        "append_only": True,
        **dict.fromkeys(("reference", "jsonl", "sqlite", "postgresql"), _LATENCY),
        **dict.fromkeys(("bm25s", "fts5"), {"recall": _LATENCY}),
        "warm_lexical": {
            "jsonl": {
                ranker: {"rare": _LATENCY, "common": _LATENCY} for ranker in _LEXICAL_RANKERS
            },
            "bm25s": {"rare": _LATENCY},
        },
    },
    "cold": {
        "floor": _WALL,
        "rows": {
            "n": True,
            **{ranker: _COLD_RANKER for ranker in _LEXICAL_RANKERS},
            "catch_up_1000": {"wall_s": True, "over_fresh": True},
        },
    },
}


def _keep(value: Any, spec: Any) -> Any:
    if spec is True:
        return value
    if isinstance(value, list):
        return [_keep(item, spec) for item in value]
    if isinstance(value, Mapping):
        return {key: _keep(value[key], part) for key, part in spec.items() if key in value}
    return value


def bench_slice(report: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What notebook 12 reads of a full benchmark report, and the report's file name."""
    return {"source": source, **_keep(report, BENCH_KEEP)}


def load_report(name: str) -> dict[str, Any]:
    """The packaged copy of a report (a name of ``_KNOWN``)."""
    if name not in _KNOWN:
        raise RemoteMemoryValidationError(f"unknown report {name!r}; known: {', '.join(_KNOWN)}")
    try:
        packaged = resources.files("memlib").joinpath("data", "reports", f"{name}.json")
        text = packaged.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RemoteMemoryError(
            f"memlib is installed without its report {name}.json (package data "
            "memlib/data/reports/ is missing)"
        ) from None
    return dict(json.loads(text))


def newest_full_bench(reports: Path) -> Path:
    """The newest ``bench-YYYYMMDD.json`` in ``reports`` (partial runs are skipped)."""
    runs = sorted(p for p in reports.iterdir() if _FULL_BENCH.match(p.name))
    if not runs:
        raise RemoteMemoryError(f"no full benchmark report (bench-YYYYMMDD.json) in {reports}")
    return runs[-1]


def packaged_reports(reports: Path) -> dict[str, str]:
    """The text each packaged copy must hold, built from the repository's ``reports``."""
    bench = newest_full_bench(reports)
    sliced = bench_slice(json.loads(bench.read_text(encoding="utf-8")), bench.name)
    copies = {
        f"{name}.json": (reports / f"{name}.json").read_text(encoding="utf-8") for name in _VERBATIM
    }
    copies[f"{BENCH}.json"] = json.dumps(sliced, indent=1, ensure_ascii=False) + "\n"
    return copies


def write_packaged_reports(reports: Path, target: Path) -> list[Path]:
    """Write the packaged copies into ``target`` (``memlib/data/reports``)."""
    target.mkdir(parents=True, exist_ok=True)
    copies = packaged_reports(reports)
    for name, text in copies.items():
        (target / name).write_text(text, encoding="utf-8")
    return [target / name for name in copies]

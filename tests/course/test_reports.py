"""The reports the notebooks read ship with the package, and cannot drift from ``reports/``.

Notebooks 11 and 12 read ``load_report``'s packaged copies, never the repository's
``reports/`` folder, so they run wherever the notebooks folder is copied. These tests
rebuild each copy from ``reports/`` — the rankers and abstention reports byte for byte,
the newest full benchmark report through ``bench_slice`` — and compare it with what is
packaged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlib.errors import RemoteMemoryValidationError
from memlib.notebook.reports import (
    ABSTENTION_DEV_SPLIT,
    BENCH,
    CROSSVAL_DEV_SPLIT,
    CROSSVAL_PAIRS_DEV_SPLIT,
    RANKERS_DEV_SPLIT,
    RETRIEVAL_STEPS_DEV_SPLIT,
    bench_slice,
    load_report,
    newest_full_bench,
    packaged_reports,
    write_packaged_reports,
)

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
PACKAGED = ROOT / "memlib" / "data" / "reports"
REFRESH = "run `python -m memlib.notebook reports` from the repository root"


@pytest.mark.parametrize(
    "name", [RANKERS_DEV_SPLIT, ABSTENTION_DEV_SPLIT, CROSSVAL_DEV_SPLIT,
             CROSSVAL_PAIRS_DEV_SPLIT, RETRIEVAL_STEPS_DEV_SPLIT]
)
def test_the_dev_split_reports_are_packaged_byte_for_byte(name: str) -> None:
    source = (REPORTS / f"{name}.json").read_bytes()
    assert (PACKAGED / f"{name}.json").read_bytes() == source, REFRESH
    assert load_report(name) == json.loads(source)


def test_the_abstention_report_has_a_suggested_floor_per_ranker() -> None:
    report = load_report(ABSTENTION_DEV_SPLIT)
    rankers = report["rankers"]
    assert rankers and set(report["suggested_floors"]) == set(rankers)
    for name, entry in rankers.items():
        assert entry["suggestion"]["floor"] == report["suggested_floors"][name]
        assert entry["curve"]["rows"][0]["floor"] is None  # the unfloored reference row


def test_the_bench_copy_is_the_slice_of_the_newest_full_run() -> None:
    newest = newest_full_bench(REPORTS)
    full = json.loads(newest.read_text(encoding="utf-8"))
    packaged = load_report(BENCH)
    assert packaged["source"] == newest.name, f"the packaged slice is of {packaged['source']}; "\
        f"the newest full run is {newest.name}: {REFRESH}"
    assert packaged == bench_slice(full, newest.name), REFRESH


def test_every_packaged_file_is_rebuilt_from_reports() -> None:
    expected = packaged_reports(REPORTS)
    assert sorted(p.name for p in PACKAGED.iterdir()) == sorted(expected)
    for name, text in expected.items():
        assert (PACKAGED / name).read_text(encoding="utf-8") == text, f"{name}: {REFRESH}"


def test_the_slice_keeps_what_notebook_12_reads(tmp_path: Path) -> None:
    full = json.loads(newest_full_bench(REPORTS).read_text(encoding="utf-8"))
    sliced = bench_slice(full, "bench-x.json")
    assert len(json.dumps(sliced)) < len(json.dumps(full)) / 5
    measured = [s for s in sliced["sizes"] if not s.get("append_only")]
    assert measured and all({"p50_ms", "p95_ms"} <= set(s["jsonl"]) for s in measured)
    assert "p50_ms" in measured[0]["sqlite"] and "p50_ms" in measured[0]["bm25s"]["recall"]
    assert all("walls_s" not in s["jsonl"] for s in measured)  # raw samples are dropped
    row = sliced["cold"]["rows"][0]
    assert set(row["baseline"]) == {"jsonl_no_index", "jsonl_index", "sqlite"}
    assert row["catch_up_1000"]["wall_s"] == full["cold"]["rows"][0]["catch_up_1000"]["wall_s"]
    assert sliced["cold"]["floor"] == {"wall_s": full["cold"]["floor"]["wall_s"]}
    # A newer full run (not a partial one) is the one sliced.
    for name in ("bench-20260101.json", "bench-20990101-cold.json", "bench-20990101.json"):
        (tmp_path / name).write_text(json.dumps(full), encoding="utf-8")
    assert newest_full_bench(tmp_path).name == "bench-20990101.json"


def test_copies_written_elsewhere_match(tmp_path: Path) -> None:
    written = write_packaged_reports(REPORTS, tmp_path / "copies")
    for path in written:
        assert path.read_bytes() == (PACKAGED / path.name).read_bytes()


def test_an_unknown_report_is_a_one_line_error() -> None:
    with pytest.raises(RemoteMemoryValidationError, match="unknown report 'bench-20261201'"):
        load_report("bench-20261201")


def test_the_steps_frame_shows_every_step_of_the_report() -> None:
    from memlib.notebook.frames import steps_frame

    report = load_report(RETRIEVAL_STEPS_DEV_SPLIT)
    frame = steps_frame(report)
    assert [label.split(".")[0] for label in frame.index] == [s["key"] for s in report["steps"]]
    for step, (_, row) in zip(report["steps"], frame.iterrows(), strict=True):
        assert row["cross-validated R@10"] == step["cross_validated"]
        assert row["in-sample R@10"] == step["in_sample"]
        low, high = step["cv_interval_95"]
        assert low <= step["cross_validated"] <= high
        assert row["CV 95% interval"] == f"{low:.3f}–{high:.3f}"
        held = [row[f"held out {f['held_out']}"] for f in step["folds"]]
        # CV is the mean of the held-out folds, as the notebook says
        assert round(sum(held) / len(held), 4) == step["cross_validated"]


def test_the_readme_step_table_is_the_reports() -> None:
    """README's "Each step of hybrid" rows: one per step, its figures to 3 places."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([a-z])\. [^|]+\| ([\d.]+) \| \**([\d.]+)\** \|$", readme, re.M)
    report = json.loads((REPORTS / f"{RETRIEVAL_STEPS_DEV_SPLIT}.json").read_text("utf-8"))
    expected = [
        (s["key"], f"{s['in_sample']:.3f}", f"{s['cross_validated']:.3f}")
        for s in report["steps"] if "skipped" not in s
    ]
    assert rows == expected


def test_the_sensitivity_frame_shows_each_grid_of_the_report() -> None:
    from memlib.notebook.frames import sensitivity_frame

    report = load_report(RETRIEVAL_STEPS_DEV_SPLIT)
    frame = sensitivity_frame(report)
    assert list(frame.index) == list(report["grid_sensitivity"])
    cv = {s["key"]: s["cross_validated"] for s in report["steps"]}
    for key, grids in report["grid_sensitivity"].items():
        assert frame.loc[key, "report's grid"] == cv[key]
        for name, grid in grids.items():
            assert frame.loc[key, f"{name} grid"] == grid["cross_validated"]


def test_the_readme_pair_vector_row_is_the_reports() -> None:
    """README's "hybrid on pair vectors" row: shipped, cross-validated and in-sample R@10
    of ``memlib --embedder e5-pair eval locomo``, to 3 places."""
    import re

    cv = json.loads((REPORTS / f"{CROSSVAL_PAIRS_DEV_SPLIT}.json").read_text(encoding="utf-8"))
    ranked = json.loads((REPORTS / "rankers-pairs-dev-split.json").read_text(encoding="utf-8"))
    hybrid = cv["hybrid"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(r"^\| hybrid on pair vectors .*?\| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                    readme, re.M)
    assert row is not None, "README.md should have the pair-vector row in its ranker table"
    shipped, crossed, inside = (float(x) for x in row.groups())
    assert shipped == round(ranked["hybrid"]["overall"]["R@10"], 3)
    assert shipped == round(hybrid["shipped"]["R@10"], 3)  # shipped = the in-sample choice
    assert crossed == round(hybrid["cross_validated"]["R@10"], 3)
    assert inside == round(hybrid["in_sample"]["R@10"], 3)


def test_the_readme_pair_floor_row_is_the_report() -> None:
    """README's min_score row for pair vectors: floor, foreign abstain, own R@10 before and
    after, its ratio and the held-out figures of reports/abstention-pairs-dev-split.json."""
    import re

    report = json.loads((REPORTS / "abstention-pairs-dev-split.json").read_text(encoding="utf-8"))
    hybrid = report["rankers"]["hybrid"]
    s, pooled = hybrid["suggestion"], hybrid["cross_validated"]["pooled"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(r"^\| hybrid on pair vectors \(`--embedder e5-pair`\) \| ([\d.]+) \| "
                    r"([\d.]+)% \| ([\d.]+) → ([\d.]+) \(([\d.]+)%\) \| ([\d.]+)%, ([\d.]+)% \|$",
                    readme, re.M)
    assert row is not None, "README.md should have the pair-vector row in its min_score table"
    got = [float(x) for x in row.groups()]
    assert got == [s["floor"], round(100 * s["foreign_abstain"], 1),
                   round(s["own_r10_unfloored"], 3), round(s["own_r10"], 3),
                   round(100 * s["own_r10_ratio"], 1), round(100 * pooled["own_r10_ratio"], 1),
                   round(100 * pooled["foreign_abstain"], 1)]


def test_the_readme_cv_intervals_are_the_reports() -> None:
    """README's sentence under the ranker table: the 95% intervals of hybrid's CV R@10 on
    turn and on pair vectors, as ``memlib eval locomo --cv-report`` wrote them."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"over the questions asked .*?: hybrid \*\*([\d.]+)–([\d.]+)\*\*, "
                      r"hybrid on pair vectors\s+\*\*([\d.]+)–([\d.]+)\*\*", readme, re.S)
    assert found is not None, "README.md should give hybrid's CV intervals"
    intervals = []
    for name in (CROSSVAL_DEV_SPLIT, CROSSVAL_PAIRS_DEV_SPLIT):
        report = json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))
        cv = report["hybrid"]["cross_validated"]
        low, high = cv["R@10_interval_95"]
        assert low <= cv["R@10"] <= high
        intervals += [f"{low:.3f}", f"{high:.3f}"]
    assert list(found.groups()) == intervals

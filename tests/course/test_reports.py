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
from typing import Any

import pytest

from memlib.errors import RemoteMemoryValidationError
from memlib.notebook.reports import (
    ABSTENTION_DEV_SPLIT,
    BENCH,
    CROSSVAL_DEV_SPLIT,
    CROSSVAL_PAIRS_DEV_SPLIT,
    RANKERS_DEV_SPLIT,
    bench_slice,
    load_report,
    newest_full_bench,
    packaged_reports,
    write_packaged_reports,
)

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
PACKAGED = ROOT / "memlib" / "data" / "reports"
# A one-off study's report (docs/retrieval.md): in reports/ only, not packaged.
RETRIEVAL_STEPS = "retrieval-steps-dev-split"
REFRESH = "run `python -m memlib.notebook reports` from the repository root"


@pytest.mark.parametrize(
    "name", [RANKERS_DEV_SPLIT, ABSTENTION_DEV_SPLIT, CROSSVAL_DEV_SPLIT, CROSSVAL_PAIRS_DEV_SPLIT]
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
    assert packaged["source"] == newest.name, (
        f"the packaged slice is of {packaged['source']}; "
        f"the newest full run is {newest.name}: {REFRESH}"
    )
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


def test_each_step_cv_is_the_mean_of_its_held_out_folds_inside_its_interval() -> None:
    for step in _report(RETRIEVAL_STEPS)["steps"]:
        if "skipped" in step:
            continue
        low, high = step["cv_interval_95"]
        assert low <= step["cross_validated"] <= high
        held = [f["held_out_r10"] for f in step["folds"]]
        assert round(sum(held) / len(held), 4) == step["cross_validated"], step["key"]


def test_the_retrieval_doc_step_table_is_the_reports() -> None:
    """docs/retrieval.md's "Each step alone" rows: one per step, its figures and its CV
    interval to 3 places (the README's table until 0.2.0)."""
    import re

    doc = (ROOT / "docs" / "retrieval.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| ([a-z])\. [^|]+\| \**([\d.]+)\** \| \**([\d.]+)\** \| "
        r"([\d.]+)–([\d.]+) \|",
        doc,
        re.M,
    )
    report = _report(RETRIEVAL_STEPS)
    expected = [
        (
            s["key"],
            f"{s['in_sample']:.3f}",
            f"{s['cross_validated']:.3f}",
            *(f"{x:.3f}" for x in s["cv_interval_95"]),
        )
        for s in report["steps"]
        if "skipped" not in s
    ]
    assert rows == expected


def _report(name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((REPORTS / f"{name}.json").read_text(encoding="utf-8"))
    return report


def test_the_readme_ranker_table_is_the_reports() -> None:
    """README's ranker table: shipped R@10, session any@10, cross-validated R@10 and its 95%
    interval, the suggested floor and the share of foreign questions it silences, every row,
    as ``memlib eval locomo`` and the abstention calibration wrote them."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `([\w+]+)`(,? [^|]*)?\| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \(([\d.]+)–([\d.]+)\) "
        r"\| ([\d.]+) \(([\d.]+)%\) \|$",
        readme,
        re.M,
    )
    shown = {}
    for name, note, *figures in rows:
        pairs = "e5-pair" in note
        kind = "-pairs" if pairs else ""
        ranked = _report(f"rankers{kind}-dev-split")[name]["overall"]
        cv = _report(f"crossval{kind}-dev-split")[name]
        suggestion = _report(f"abstention{kind}-dev-split")["rankers"][name]["suggestion"]
        crossed = cv["cross_validated"]
        assert figures == [
            f"{ranked['R@10']:.3f}",
            f"{ranked['Sany@10']:.3f}",
            f"{crossed['R@10']:.3f}",
            *(f"{x:.3f}" for x in crossed["R@10_interval_95"]),
            f"{suggestion['floor']:g}",
            f"{100 * suggestion['foreign_abstain']:.1f}",
        ], name
        assert round(cv["shipped"]["R@10"], 3) == float(figures[0])
        shown[name + (" pairs" if pairs else "")] = figures
    assert set(shown) == {"baseline", "bm25", "bm25+stopwords", "hybrid", "hybrid pairs"}


def test_the_readme_ranker_table_names_the_split_of_the_reports() -> None:
    """The sentence over the ranker table gives the conversations (the cross-validation's
    folds) and questions of the reports every row reads."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"LoCoMo dev split's (\d+) conversations \(([\d,]+) questions", readme)
    assert stated is not None, "README.md should say which split its ranker table is on"
    conversations, questions = int(stated[1]), int(stated[2].replace(",", ""))
    for kind in ("", "-pairs"):
        for name, cv in _report(f"crossval{kind}-dev-split").items():
            assert len(cv["folds"]) == conversations, name
            assert cv["shipped"]["n"] == questions, name
            assert _report(f"rankers{kind}-dev-split")[name]["overall"]["n"] == questions, name
        floors = _report(f"abstention{kind}-dev-split")["data"]
        assert (len(floors["conversations"]), floors["questions"]) == (conversations, questions)


def test_the_abstention_doc_floors_table_is_the_reports() -> None:
    """docs/abstention.md's table of the floors as shipped, every row (the pair-vector one
    the README's until 0.2.0): floor, foreign abstain, own R@10 before and after, its ratio
    and the held-out figures."""
    import re

    doc = (ROOT / "docs" / "abstention.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| ([\w+]+)( on pair vectors \(`--embedder e5-pair`\))? \| ([\d.]+) \| "
        r"([\d.]+)% \| ([\d.]+) → ([\d.]+) \(([\d.]+)%\) \| ([\d.]+)%, ([\d.]+)% \|$",
        doc,
        re.M,
    )
    shown = []
    for name, pairs, *figures in rows:
        entry = _report(f"abstention{'-pairs' if pairs else ''}-dev-split")["rankers"][name]
        s, pooled = entry["suggestion"], entry["cross_validated"]["pooled"]
        assert [float(x) for x in figures] == [
            s["floor"],
            round(100 * s["foreign_abstain"], 1),
            round(s["own_r10_unfloored"], 3),
            round(s["own_r10"], 3),
            round(100 * s["own_r10_ratio"], 1),
            round(100 * pooled["own_r10_ratio"], 1),
            round(100 * pooled["foreign_abstain"], 1),
        ], name + pairs
        shown.append(name + (" pairs" if pairs else ""))
    assert shown == ["baseline", "bm25", "bm25+stopwords", "hybrid", "hybrid pairs"]


def test_the_readme_results_table_is_the_bench_report() -> None:
    """Every cell of the README's Results table is the one ``python -m benchmarks.run
    --readme-table`` prints from the report it names (the hybrid rows: the next test)."""
    import re

    from benchmarks.report import readme_table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Results") : readme.index("## Layout")]
    named = re.search(r"--readme-table reports/(bench-\d{8}(?:-[a-z]+)?\.json)", section)
    assert named is not None
    printed = readme_table(json.loads((REPORTS / named.group(1)).read_text(encoding="utf-8")))
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in printed.splitlines()
        if line.startswith("| ")
    ]
    floor = re.search(r"floor \(python start \+ import memlib\): (\d+ ms), ([\d.]+ MB)", printed)
    assert floor is not None

    def find(*prefix: str) -> list[str] | None:
        return next((r for r in rows if tuple(r[: len(prefix)]) == prefix), None)

    def p50(n: str, store: str, ranker: str) -> str:
        row = find(n, store, ranker)
        return "" if row is None else f"{row[3].split(' / ')[0]} / {row[4].split(' / ')[0]}"

    def cold(n: str, ranker: str, column: int) -> tuple[str, str]:
        rare, common = (find(n, ranker, query) for query in ("rare", "common"))
        assert rare is not None and common is not None
        return rare[column], common[column]

    shown = [r for r in re.findall(r"^\| (?:100k|1M) \|.*$", section, re.M) if "| hybrid" not in r]
    assert len(shown) == 7
    for line in shown:
        size, recall, *cells = [c.strip() for c in line.strip("|").split("|")]
        n = {"100k": "100,000", "1M": "1,000,000"}[size]
        if recall.startswith("warm, bm25+stopwords"):
            expected = [p50(n, s, "bm25+stopwords") for s in ("JSONL", "SQLite", "PostgreSQL")]
            expected.append("bm25s " + p50(n, "bm25s retrieve (peer)", "BM25"))
        elif recall.startswith("cold after"):  # the catch-up table: N, then "… ms, … MB"
            catch_up = next(r for r in rows if r[0] == n and r[1].endswith(" MB"))
            expected = [catch_up[1], "", "", f"parsing them: {catch_up[4]}"]
        elif recall.startswith("cold, baseline"):
            jsonl, sqlite = cold(n, "baseline", 4)[0], cold(n, "baseline", 5)[0]
            shown_floor = f"floor {floor.group(1)}"
            if cells[-1].endswith("MB"):
                shown_floor += f", {floor.group(2)}"
            expected = [jsonl, sqlite, "", shown_floor]
        else:
            assert recall.startswith("cold, bm25+stopwords"), f"{recall!r}: add its check here"
            expected = [
                " / ".join(c.split(" ms")[0] for c in cold(n, "bm25+stopwords", i)) + " ms"
                for i in (4, 5)
            ] + ["", f"floor {floor.group(1)}"]
        assert cells == expected, line


def test_the_readme_hybrid_rows_are_the_hybrid_report() -> None:
    """The Results table's hybrid rows are the ones ``hybrid_table`` prints from the hybrid
    report the README names: warm p50 (rare / common) and cold rare, per backend, and the
    floor (start, import, the model, one question) beside the cold row."""
    import re

    from benchmarks.report import hybrid_table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Results") : readme.index("## Layout")]
    named = re.search(r"hybrid rows: reports/(bench-\d{8}(?:-[a-z]+)?\.json)", section)
    assert named is not None
    report = json.loads((REPORTS / named.group(1)).read_text(encoding="utf-8"))
    printed = hybrid_table(report["hybrid"])
    floor = re.search(r"a fresh process\): ([\d,]+ ms, [\d.]+ MB)", printed)
    assert floor is not None
    rows = {
        (r[0], r[1]): r
        for r in ([c.strip() for c in line.strip("|").split("|")] for line in printed.splitlines())
        if r[0].replace(",", "").isdigit()
    }
    shown = re.findall(r"^\| (100k|1M) \| (hybrid [^|]*) \|(.*)$", section, re.M)
    assert len(shown) == 4
    for size, recall, rest in shown:
        n = {"100k": "100,000", "1M": "1,000,000"}[size]
        cells = [c.strip() for c in rest.strip().strip("|").split("|")]
        per_backend = [rows.get((n, b)) for b in ("JSONL", "SQLite", "PostgreSQL")]
        if recall.startswith("hybrid warm"):
            expected = [
                "—" if r is None else f"{r[2].split(' / ')[0]} / {r[3].split(' / ')[0]}"
                for r in per_backend
            ] + [""]
        else:
            assert recall.startswith("hybrid cold, rare"), recall
            expected = ["—" if r is None else r[4] for r in per_backend] + [f"floor {floor[1]}"]
        assert cells == expected, f"{size} {recall}"

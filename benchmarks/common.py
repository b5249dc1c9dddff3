"""What every benchmark section shares: timing, summaries, digests, fresh processes.

Kept apart from ``run.py`` so that the sections (``lexical``, ``cold``, ``hybrid_scale``)
can use it without importing the orchestrator, which imports them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The LoCoMo development split, read from ../shared (never copied into the project).
LOCOMO_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
LIMIT = 10
USER = "bench-user"
BATCH = 10_000

Log = Callable[[str], None]


def ints(text: str) -> list[int]:
    """``"10000,100000"`` -> ``[10000, 100000]`` (empty parts skipped)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"not comma-separated integers: {text!r}") from None


def sizes_arg(text: str) -> list[int]:
    """A ``--sizes`` option's type: one or more positive record counts, else argparse's
    one-line usage error."""
    try:
        sizes = ints(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"sizes must be positive record counts: {text!r}")
    return sizes


def sized_run_parser(doc: str | None, *, budget: float) -> argparse.ArgumentParser:
    """A parser with the options of a run over store sizes: ``--sizes``, ``--queries``,
    ``--budget`` (``budget`` seconds by default) and ``--cold-rounds``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--sizes", type=sizes_arg, default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=20, help="queries per set at most")
    parser.add_argument("--budget", type=float, default=budget,
                        help="seconds a warm series may take before it stops (see above)")
    parser.add_argument("--cold-rounds", type=int, default=3)
    return parser


def progress_log(began: float, quiet: bool = False) -> Log:
    """Progress lines on stderr, each with the seconds since ``began`` (monotonic)."""

    def log(message: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - began:7.1f}s] {message}", file=sys.stderr, flush=True)

    return log


def dated_report(given: str | None, stem: str) -> Path:
    """``given``, else ``reports/<stem>-YYYYMMDD.json`` (today, UTC)."""
    from datetime import UTC, datetime

    today = datetime.now(UTC).strftime("%Y%m%d")
    return Path(given) if given else ROOT / "reports" / f"{stem}-{today}.json"


def write_report(
    out: Path, report: dict[str, Any], began: float, tables: Callable[[dict[str, Any]], str],
    log: Log,
) -> None:
    """Stamp the run's seconds, write the JSON report, print its tables."""
    report["seconds"] = round(time.monotonic() - began, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(tables(report))
    log(f"report written to {out} ({report['seconds']:,.0f} s)")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def summary(seconds: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    if not ordered:
        return {}
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"p50_ms": statistics.median(ordered) * 1e3, "p95_ms": p95 * 1e3, "n": len(ordered)}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def recall_series(
    recall: Callable[[str], Any], queries: Sequence[str], warmup: int = 2,
    candidates: list[int] | None = None, before: Callable[[], None] | None = None,
    inspect: Callable[[Any], None] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Time ``recall`` per query; what it returns is serialised after the clock stops.

    ``candidates`` collects each result's ``candidate_records`` (when it has one);
    ``before`` runs ahead of every timed query and ``inspect`` after it, with its
    result, both outside the clock.
    """
    for q in queries[:warmup]:
        recall(q)
    times, digests = [], []
    for q in queries:
        if before is not None:
            before()
        seconds, result = timed(lambda: recall(q))  # noqa: B023 (called at once)
        times.append(seconds)
        digests.append(digest(result.to_json() if hasattr(result, "to_json") else str(result)))
        if candidates is not None and hasattr(result, "candidate_records"):
            candidates.append(int(result.candidate_records))
        if inspect is not None:
            inspect(result)
    return summary(times), digests


def peak_rss_mb() -> float:
    """This process's own peak resident memory.

    ``VmHWM`` of ``/proc/self/status``, not ``ru_maxrss``: Linux carries ``ru_maxrss``
    across ``exec``, and a child started by ``subprocess`` (vfork) would report the
    parent's peak — here, the benchmark holding a million generated records.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- a fresh process: wall time and its own peak memory ------------------------------------

# The child reports its own peak memory (VmHWM) on exit; the wall time is the parent's.
# With arguments it is `memlib ARGS`; with none, Python's start and `import memlib` (the
# floor of every cold row); with "--embed-floor NAME TEXT", that plus loading the
# embedder NAME and embedding TEXT once (the floor of a cold hybrid recall).
# A child process's own peak RSS, printed to stderr at exit (``VMHWM <MB>``).
PEAK_AT_EXIT = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('VMHWM', int(line.split()[1]) / 1024, file=sys.stderr)\n"
    "atexit.register(_peak)\n"
)
COLD_CHILD = PEAK_AT_EXIT + (
    "argv = sys.argv[1:]\n"
    "if argv[:1] == ['--embed-floor']:\n"
    "    import memlib\n"
    "    from memlib.rankers import embeddings\n"
    "    embeddings.get_embedder(argv[1]).encode([argv[2]])\n"
    "elif argv:\n"
    "    import runpy\n"
    "    sys.argv = ['memlib', *argv]\n"
    "    runpy.run_module('memlib', run_name='__main__')\n"
    "else:\n"
    "    import memlib\n"
)


class ColdRunError(RuntimeError):
    """A fresh process failed or ran out of time; the message says which and why."""


def compile_package() -> None:
    """memlib's byte-code, written where Python looks for it (once per run)."""
    import compileall

    if not getattr(compile_package, "done", False):
        compileall.compile_dir(str(ROOT / "memlib"), quiet=1)
        compile_package.done = True  # type: ignore[attr-defined]


def cold_run(
    args: Sequence[str], rounds: int = 3, before: Callable[[], None] | None = None,
    timeout: float | None = None, child: str | None = None,
) -> dict[str, Any]:
    """Median wall time and peak RSS of ``rounds`` fresh processes (``args``: memlib's,
    or ``child``'s: another program that prints its peak RSS as ``COLD_CHILD`` does).

    ``answer`` is a digest of the first round's stdout, so two backends' answers can be
    compared without keeping them.
    """
    walls, peaks, answers = [], [], []
    # As a user's machine runs it: byte-code written once and reused (a shell with
    # PYTHONDONTWRITEBYTECODE would make every fresh process compile memlib again).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    compile_package()
    for _ in range(rounds):
        if before is not None:
            before()
        start = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "-c", child or COLD_CHILD, *args],
                                 capture_output=True,
                                 text=True, cwd=ROOT, check=False, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise ColdRunError(f"no answer within {timeout:.0f} s") from None
        walls.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise ColdRunError(f"exit {out.returncode}: {out.stderr.strip()[-500:]}")
        peaks.append(float(out.stderr.split("VMHWM")[-1].split()[0]))
        answers.append(digest(out.stdout))
    return {"wall_s": round(statistics.median(walls), 4), "walls_s": [round(w, 4) for w in walls],
            "peak_rss_mb": round(max(peaks), 1), "answer": answers[0],
            "same_answer_every_round": len(set(answers)) == 1}

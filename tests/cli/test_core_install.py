"""The core install: memlib with no extras, in a venv that holds nothing else.

The project is built into a wheel from a copy of the sources (offline, no build
isolation: the test environment's setuptools) and installed with ``--no-deps`` into a
fresh ``python -m venv --without-pip``. No tqdm, no pandas, no anthropic: the commands a
newcomer runs first must work there, and print what they print in the full environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlib import __version__
from memlib.cli import main
from memlib.sample import sample_records

ROOT = Path(__file__).resolve().parents[2]
USER = "core-user"


def _run(command: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
        command, check=False, capture_output=True, text=True, timeout=120, **options
    )
    return done


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``bin`` folder of a fresh venv holding memlib and nothing else."""
    work = tmp_path_factory.mktemp("core")
    source = work / "source"  # a copy: the build writes build/ and *.egg-info beside it
    source.mkdir()
    shutil.copytree(
        ROOT / "memlib", source / "memlib", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--wheel-dir",
            str(work / "wheels"),
            str(source),
        ]
    )
    assert built.returncode == 0, built.stderr
    # The wheel's version is memlib.__version__, the one version source (pyproject reads it).
    (wheel,) = (work / "wheels").glob(f"memlib-{__version__}-*.whl")
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # The test environment's pip installs into the new venv, which has no pip of its own.
    installed = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ]
    )
    assert installed.returncode == 0, installed.stderr
    yield venv / "bin"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "MEMLIB_STORE", "MODEL_ID", "ANTHROPIC_API_KEY")
    values = {k: v for k, v in os.environ.items() if k not in drop}
    values.update(WORKBUDDY_HOME=str(tmp_path / "home"), WORKBUDDY_USER_ID=USER)
    return values


def test_the_venv_holds_memlib_and_nothing_else(
    core: Path, env: dict[str, str], tmp_path: Path
) -> None:
    code = (
        "import importlib.util, memlib, sys\n"
        "extras = ('tqdm', 'pandas', 'anthropic', 'numpy', 'psycopg', 'pip')\n"
        "print(memlib.__file__.startswith(sys.prefix), "
        "[m for m in extras if importlib.util.find_spec(m)])\n"
    )
    done = _run([str(core / "python"), "-c", code], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True []\n"


def test_import_and_recall_work_without_tqdm(
    core: Path,
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [
        dict(item, source=item["source"].to_dict(), kind=item["kind"].value)
        for item in sample_records()
    ]
    data = tmp_path / "records.jsonl"
    data.write_text(
        "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8"
    )
    # The console script of the wheel, with the bar asked for: no tqdm means no bar,
    # quietly, and the same import.
    imported = _run(
        [str(core / "memlib"), "import", str(data), "--progress"], cwd=tmp_path, env=env
    )
    assert (imported.returncode, imported.stderr) == (0, "")
    assert imported.stdout == f"imported {len(items)} records in 1 batches\n"
    query = ["recall", "layered memory", "--as-of", "2026-08-10T12:00:00Z", "--query-id", "q"]
    recalled = _run([str(core / "python"), "-m", "memlib", *query], cwd=tmp_path, env=env)
    assert (recalled.returncode, recalled.stderr) == (0, "")
    assert "conversation-003" in recalled.stdout
    # The same bytes as the full environment prints for the same store.
    for name in ("WORKBUDDY_HOME", "WORKBUDDY_USER_ID"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.delenv("MEMLIB_STORE", raising=False)
    assert main(query) == 0
    assert recalled.stdout == capsys.readouterr().out


def test_demo_is_the_same_on_a_core_install(
    core: Path, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = _run([str(core / "memlib"), "demo"], cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr) == (0, "")
    assert main(["demo"]) == 0
    assert done.stdout == capsys.readouterr().out

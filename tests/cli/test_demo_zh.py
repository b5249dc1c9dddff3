"""``memlib demo --lang zh``: the demo on the Chinese sample corpus, as a real subprocess."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from memlib.cli.demo import DEMO_QUERIES
from memlib.sample import SAMPLE_QUERY, SAMPLE_QUERY_ZH

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def env(clean_env, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    return {**clean_env(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}


def _run(python: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-m", "memlib", "demo", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=90,
    )


def _demo(python: str, env: dict[str, str], cwd: Path, *args: str) -> str:
    done = _run(python, env, cwd, *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_demo_queries_are_the_sample_queries():
    assert DEMO_QUERIES == {"en": SAMPLE_QUERY, "zh": SAMPLE_QUERY_ZH}


def test_demo_in_chinese_shows_chinese_hits(python, env, tmp_path):
    out = _demo(python, env, tmp_path, "--lang", "zh")
    assert f"# recall_history({SAMPLE_QUERY_ZH!r}, limit=5)" in out
    profile = out.split("</remote_profile>")[0].split("\n", 2)[2]
    assert HAN.search(profile)  # the Chinese profile snapshot
    snippets = re.findall(r"<snippet>(.*?)</snippet>", out)
    assert len(snippets) >= 3 and all(HAN.search(s) for s in snippets)
    assert 'memory_id="conversation-003"' in out and 'matched_terms="分层,层记,记忆"' in out
    # the same ids and clock as the English demo: the worked example scores the same
    english = _demo(python, env, tmp_path)
    assert "0.995161" in out and "0.995161" in english
    assert SAMPLE_QUERY_ZH not in english
    assert not any(HAN.search(s) for s in re.findall(r"<snippet>(.*?)</snippet>", english))
    assert list((tmp_path / "tmp").iterdir()) == []  # the temporary stores are cleaned up


def test_demo_help_mentions_the_language(python, env, tmp_path):
    done = _run(python, env, tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert "--lang {en,zh}" in done.stdout
    assert "zh" in done.stdout.split("--lang {en,zh}")[-1]


def test_demo_refuses_an_unknown_language(python, env, tmp_path):
    done = _run(python, env, tmp_path, "--lang", "fr")
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and "invalid choice: 'fr'" in done.stderr


def test_demo_root_keeps_one_language(python, env, tmp_path):
    root = str(tmp_path / "store")
    _demo(python, env, tmp_path, "--root", root)
    done = _run(python, env, tmp_path, "--lang", "zh", "--root", root)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "'en' sample corpus" in done.stderr

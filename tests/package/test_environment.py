"""The conda environment installs what the README's pip set-up installs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _extras(pattern: str, text: str) -> set[str]:
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, pattern
    return set(found.group(1).split(","))


def test_environment_yml_has_the_makefiles_extras() -> None:
    # Notebook 11 needs the embeddings extra: a conda user must get every extra the
    # Makefile installs, or a notebook fails in their environment only.
    make = _extras(r"^EXTRAS\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(encoding="utf-8"))
    conda = _extras(r'^\s*- -e "\.\[([^\]]+)\]"$',
                    (ROOT / "environment.yml").read_text(encoding="utf-8"))
    assert "embeddings" in make
    assert conda == make

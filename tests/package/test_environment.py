"""One environment: the Makefile and environment.yml install the same extras under the
same constraints.txt, which pins every package they pull in, inside pyproject's ranges;
and one version, ``memlib.__version__``."""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import memlib

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
CONDA = (ROOT / "environment.yml").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _extras(pattern: str, text: str) -> set[str]:
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, pattern
    return set(found.group(1).split(","))


MAKE_EXTRAS = _extras(r"^EXTRAS\s*:=\s*(\S+)$", MAKEFILE)


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[\w.-]+", version), f"not an exact pin: {line}"
            assert canonicalize_name(name) not in pins, f"pinned twice: {name}"
            pins[canonicalize_name(name)] = version
    return pins


def _requirements(extras: set[str]) -> list[Requirement]:
    declared = PYPROJECT["project"]["optional-dependencies"]
    return [Requirement(r) for extra in sorted(extras) for r in declared[extra]]


def test_environment_yml_has_the_makefiles_extras_and_constraints() -> None:
    # Notebook 11 needs the embeddings extra: a conda user must get every extra the
    # Makefile installs, or a notebook fails in their environment only.
    conda = _extras(r'^\s*- -e "\.\[([^\]]+)\]"$', CONDA)
    assert "embeddings" in MAKE_EXTRAS and "minilm" not in MAKE_EXTRAS
    assert conda == MAKE_EXTRAS
    assert re.search(r"^\s*- -c constraints\.txt$", CONDA, re.M), "environment.yml: -c"


def test_make_installs_under_constraints_txt() -> None:
    assert re.search(r"^\$\(STAMP\):.*\bconstraints\.txt\b", MAKEFILE, re.M)
    installs = re.findall(r"pip install .*-e '\.\[\$\(EXTRAS\)\]'", MAKEFILE)
    assert installs and all("-c constraints.txt" in line for line in installs)


def test_every_extra_is_a_range_and_its_pin_is_inside_it() -> None:
    pins = _pins()
    for req in _requirements(MAKE_EXTRAS):
        name = canonicalize_name(req.name)
        assert not any(s.operator == "==" for s in req.specifier), f"{req}: a range, not a pin"
        assert name in pins, f"{name} is not in constraints.txt"
        assert req.specifier.contains(pins[name]), f"constraints.txt {name}=={pins[name]}: {req}"


def test_constraints_txt_pins_everything_the_extras_pull_in() -> None:
    # Walk the installed metadata from memlib's extras down; each package reached is
    # pinned, and this environment (built by make from the file) holds that version.
    pins = _pins()
    todo = _requirements(MAKE_EXTRAS)
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        assert name in pins, f"{name} (needed by the extras) is not in constraints.txt"
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        assert dist.version == pins[name], f"installed {name} {dist.version}, pinned {pins[name]}"
        for text in dist.requires or []:
            child = Requirement(text)
            envs = [{"extra": e} for e in req.extras or {""}]
            if child.marker is None or any(child.marker.evaluate(e) for e in envs):
                todo.append(child)


def test_one_version_source() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert attr == {"attr": "memlib.__version__"}
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.M)
    assert newest is not None and newest.group(1) == memlib.__version__

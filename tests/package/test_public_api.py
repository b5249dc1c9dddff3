"""The public API, written down: ``memlib.__all__`` and each public module's names.

A public module is one whose dotted path has no part starting with ``_``; its public
names are its ``__all__`` when it has one, else the names it defines at top level without
a leading underscore. A change to either shows here as a diff against
``public_api.txt``: a name added, renamed or removed is a decision, not an accident.
Regenerate the file with ``python tests/package/test_public_api.py`` and review the diff.
"""

from __future__ import annotations

import ast
import difflib
import sys
from pathlib import Path

import memlib

PACKAGE = Path(memlib.__file__).resolve().parent
SNAPSHOT = Path(__file__).with_name("public_api.txt")


def public_modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "__pycache__" in path.parts or any(p.startswith("_") for p in parts[1:]):
            continue
        found[".".join(parts)] = path
    return found


def public_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    return sorted(ast.literal_eval(node.value))
                if isinstance(target, ast.Name):
                    names.add(target.id)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return sorted(n for n in names if not n.startswith("_"))


def snapshot() -> str:
    lines = [f"memlib.__all__: {', '.join(memlib.__all__)}"]
    lines += [
        f"{module}: {', '.join(public_names(path))}" for module, path in public_modules().items()
    ]
    return "\n".join(lines) + "\n"


def test_the_public_api_is_the_snapshot() -> None:
    expected = SNAPSHOT.read_text(encoding="utf-8")
    actual = snapshot()
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "public_api.txt",
            "now",
        )
    )
    assert actual == expected, f"the public API changed; if meant, regenerate:\n{diff}"


def test_every_exported_name_exists() -> None:
    missing = [name for name in memlib.__all__ if not hasattr(memlib, name)]
    assert missing == []


if __name__ == "__main__":
    SNAPSHOT.write_text(snapshot(), encoding="utf-8")
    sys.stdout.write(f"wrote {SNAPSHOT}\n")

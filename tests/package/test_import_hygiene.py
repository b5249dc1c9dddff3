"""SPEC §2 and §5: importing memlib has no side effects; the runtime resolves lazily."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import memlib
from memlib import RemoteMemoryError, user_scope_for
from memlib._runtime import default_runtime, reset_default_runtime, runtime_client
from memlib.stores import RemoteMemoryStore

HEAVY = ("anthropic", "pandas", "numpy", "ipywidgets", "matplotlib", "psycopg", "torch")
LAZY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "MODEL_ID",
    "WORKBUDDY_HOME",
    "WORKBUDDY_USER_ID",
    "MEMLIB_STORE",
)

# Runs in a fresh interpreter. It spies on every environment lookup, imports memlib,
# then reports what was loaded and read. A fake ``anthropic`` package on PYTHONPATH
# leaves a marker file if anything imports it or builds a client.
PROBE = textwrap.dedent(
    """
    import json, os, sys
    seen = []
    _encode = os.environ.encodekey
    os.environ.encodekey = lambda key: (seen.append(key), _encode(key))[1]
    import memlib
    report = {
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in %(heavy)r),
        "env_read": sorted(set(seen)),
    }
    after_import = sorted(set(seen))
    runtime = memlib.default_runtime()
    report["store_path"] = str(runtime.store.path)
    report["user_id"] = runtime.user_id
    report["user_scope"] = runtime.store.user_scope
    report["engine_store_is_store"] = runtime.engine.store is runtime.store
    report["records_after_runtime"] = len(runtime.store.read_all())
    try:
        memlib.runtime_client()
    except memlib.RemoteMemoryError as exc:
        report["client_error"] = [type(exc).__name__, str(exc)]
    else:
        report["client_error"] = None
    report["env_read_later"] = sorted(set(seen) - set(after_import))
    report["modules_after"] = sorted(m for m in sys.modules if m.split(".")[0] in %(heavy)r)
    print(json.dumps(report))
    """
) % {"heavy": HEAVY}

FAKE_ANTHROPIC = textwrap.dedent(
    """
    import os
    with open(os.environ["FAKE_ANTHROPIC_MARKER"], "a") as handle:
        handle.write("imported\\n")

    class Anthropic:
        def __init__(self, **kwargs):
            with open(os.environ["FAKE_ANTHROPIC_MARKER"], "a") as handle:
                handle.write("client built\\n")
    """
)


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def probe(tmp_path_factory, clean_env, python):
    root = tmp_path_factory.mktemp("hygiene")
    home, workbuddy, cwd, fake = root / "home", root / "workbuddy", root / "cwd", root / "fake"
    for folder in (home, workbuddy, cwd, fake / "anthropic"):
        folder.mkdir(parents=True)
    (fake / "anthropic" / "__init__.py").write_text(FAKE_ANTHROPIC)
    marker = root / "anthropic-marker.txt"
    env = clean_env(home)
    env.update(
        {
            "WORKBUDDY_HOME": str(workbuddy),
            "WORKBUDDY_USER_ID": "  Bob ",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(fake), env.get("PYTHONPATH")])),
            "FAKE_ANTHROPIC_MARKER": str(marker),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    proc = subprocess.run(
        [python, "-c", PROBE],
        check=False,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "report": json.loads(proc.stdout),
        "trees": {
            name: _tree(folder)
            for name, folder in (("home", home), ("workbuddy", workbuddy), ("cwd", cwd))
        },
        "marker": marker,
        "workbuddy": workbuddy,
    }


def test_import_loads_no_heavy_package(probe):
    assert probe["report"]["modules"] == []
    assert probe["report"]["modules_after"] == []


def test_import_reads_no_key_and_resolves_nothing(probe):
    read = set(probe["report"]["env_read"])
    assert not read & set(LAZY_VARIABLES), read
    # the spy works: the same variables are read once the runtime is really used
    later = set(probe["report"]["env_read_later"])
    assert {"WORKBUDDY_HOME", "WORKBUDDY_USER_ID", "MODEL_ID"} <= later, later


def test_import_builds_no_client(probe):
    assert not probe["marker"].exists(), probe["marker"].read_text()


def test_nothing_is_created_under_home_workbuddy_home_or_cwd(probe):
    assert probe["trees"] == {"home": [], "workbuddy": [], "cwd": []}


def test_default_runtime_resolves_from_the_environment_on_first_use(probe):
    report = probe["report"]
    scope = user_scope_for("Bob")
    assert report["user_id"] == "  Bob "
    assert report["user_scope"] == scope
    expected = probe["workbuddy"] / "remote-memory" / "users" / scope / "records.jsonl"
    assert report["store_path"] == str(expected)
    assert report["engine_store_is_store"] is True
    assert report["records_after_runtime"] == 0


def test_runtime_client_without_configuration_names_what_is_missing(probe):
    name, message = probe["report"]["client_error"]
    assert "MODEL_ID" in message and "ANTHROPIC_API_KEY" in message
    assert name == "MissingConfigurationError"


# -- in-process: laziness and the client boundary -----------------------------------------


@pytest.fixture
def fresh_runtime(monkeypatch, tmp_path):
    for name in ("MEMLIB_STORE", "WORKBUDDY_HOME", "WORKBUDDY_USER_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    reset_default_runtime()
    yield tmp_path
    reset_default_runtime()


def test_default_runtime_reads_the_environment_when_called_not_at_import(
    fresh_runtime, monkeypatch
):
    tmp_path = fresh_runtime
    monkeypatch.setenv("WORKBUDDY_HOME", str(tmp_path / "wb"))
    monkeypatch.setenv("WORKBUDDY_USER_ID", "carol")
    runtime = default_runtime()
    scope = user_scope_for("carol")
    assert runtime.user_id == "carol"
    assert runtime.store.user_scope == scope
    expected = tmp_path / "wb" / "remote-memory" / "users" / scope / "records.jsonl"
    assert isinstance(runtime.store, RemoteMemoryStore) and runtime.store.path == expected
    assert default_runtime() is runtime  # built once
    assert not (tmp_path / "wb").exists()  # and built without touching the disk
    # a change of environment takes effect after a reset
    monkeypatch.setenv("WORKBUDDY_USER_ID", "dave")
    reset_default_runtime()
    assert default_runtime().store.user_scope == user_scope_for("dave")


def test_default_runtime_defaults(fresh_runtime):
    tmp_path = fresh_runtime
    runtime = default_runtime()
    assert runtime.user_id == "local-user"
    scope = user_scope_for("local-user")
    expected = (
        tmp_path / "home" / ".learn_workbuddy" / "remote-memory" / "users" / scope / "records.jsonl"
    )
    assert isinstance(runtime.store, RemoteMemoryStore) and runtime.store.path == expected
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        ({}, ["MODEL_ID", "ANTHROPIC_API_KEY"]),
        ({"MODEL_ID": "claude-test"}, ["ANTHROPIC_API_KEY"]),
        ({"ANTHROPIC_API_KEY": "sk-test"}, ["MODEL_ID"]),
    ],
)
def test_runtime_client_names_the_missing_variable_and_builds_nothing(
    monkeypatch, present, missing
):
    built = []
    fake = types.ModuleType("anthropic")
    fake.Anthropic = lambda **kwargs: built.append(kwargs)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "anthropic", fake)
    for name in ("MODEL_ID", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in present.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RemoteMemoryError) as info:
        runtime_client()
    for name in missing:
        assert name in str(info.value)
    for name in present:
        assert name not in str(info.value)
    assert built == []


def test_runtime_client_builds_the_client_only_when_configured(monkeypatch):
    built = []
    fake = types.ModuleType("anthropic")

    class Anthropic:
        def __init__(self, **kwargs):
            built.append(kwargs)

    fake.Anthropic = Anthropic  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "anthropic", fake)
    monkeypatch.setenv("MODEL_ID", "claude-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-123")
    client = runtime_client()
    assert isinstance(client, Anthropic)
    assert built == [{"api_key": "sk-test-123"}]


def test_memlib_exports_the_lazy_entry_points():
    assert memlib.default_runtime is default_runtime
    assert memlib.runtime_client is runtime_client


# -- the command line stays in memlib/cli/ -------------------------------------------------

PACKAGE = Path(memlib.__file__).parent


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    package = parts if path.name == "__init__.py" else parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_library_modules_have_no_command_line_code():
    # argparse and the CLI belong to memlib/cli/ and to ``__main__`` modules (``python -m
    # memlib`` runs the CLI, ``python -m memlib.notebook`` the course's maintenance); the
    # library below them never reaches up.
    cli = PACKAGE / "cli"
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == cli or path.name == "__main__.py":
            continue
        found = {
            n
            for n in _imports(path)
            if n == "argparse" or n == "memlib.cli" or n.startswith("memlib.cli.")
        }
        if found:
            offenders.append(f"{path.relative_to(PACKAGE)}: {', '.join(sorted(found))}")
    assert offenders == []


def test_no_module_imports_tqdm_at_the_top():
    # The core install has no tqdm: it may only be imported where a bar is drawn.
    tops = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "tqdm" for n in names):
                tops.append(str(path.relative_to(PACKAGE)))
    assert tops == []

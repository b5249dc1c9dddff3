"""A throwaway JupyterLab server for the browser tests.

``running_jupyterlab(root)`` starts ``jupyter lab`` on 127.0.0.1, on a free port, with a
random token and its own config / data / runtime / IPython folders in a temporary
directory (so no workspace, tab or setting of the machine leaks in), and always stops it
by the process id it started — also when the test body fails. Kernels the server
started are shut down through the REST API and, failing that, ended by their pids.

The user settings written here make the page deterministic for a robot: no news
popup, no autosave (the notebooks are copies, but nothing should be written behind
the test's back), and no windowed rendering (every cell is in the DOM, so widgets
below the fold can be found and driven).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT = 90.0  # seconds; the machine may be busy with other work
STOP_TIMEOUT = 20.0

USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@dataclass(frozen=True)
class JupyterLab:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path
    pid: int
    log: Path

    def lab_url(self, notebook: str) -> str:
        """The page of one notebook, with a fresh (reset) workspace."""
        return f"{self.url}/lab/tree/{notebook}?token={self.token}&reset"

    def api(self, path: str, method: str = "GET") -> Any:  # the server's JSON
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_user_settings(config_dir: Path) -> None:
    for relative, settings in USER_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (read from /proc), deepest last."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..." — comm may hold spaces or parentheses.
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == current]
        found.extend(kids)
        frontier.extend(kids)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(process: subprocess.Popen[bytes], lab: JupyterLab | None) -> None:
    descendants = _children(process.pid)
    if lab is not None and process.poll() is None:
        with contextlib.suppress(Exception):
            for kernel in lab.api("kernels") or []:
                lab.api(f"kernels/{kernel['id']}", method="DELETE")
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    # Kernels run in their own sessions; end any the server did not, by pid.
    for pid in descendants:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running_jupyterlab(root: Path, *, pythonpath: Path | None = None) -> Iterator[JupyterLab]:
    """JupyterLab serving ``root``; ``pythonpath`` goes first on the kernels' path."""
    root = Path(root).resolve()
    with tempfile.TemporaryDirectory(prefix="memlib-jlab-") as tmp:
        home = Path(tmp)
        dirs = {name: home / name for name in ("config", "data", "runtime", "ipython")}
        for folder in dirs.values():
            folder.mkdir()
        _write_user_settings(dirs["config"])
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            IPYTHONDIR=str(dirs["ipython"]),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTERLAB_SETTINGS_DIR", None)
        env.pop("JUPYTERLAB_WORKSPACES_DIR", None)
        if pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(pythonpath)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            )
        port, token = free_port(), secrets.token_hex(24)
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--port-retries",
            "0",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.open_browser=False",
            "--ServerApp.shutdown_no_activity_timeout=0",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        log = home / "jupyterlab.log"
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                command,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        lab = JupyterLab(
            url=f"http://127.0.0.1:{port}", token=token, root=root, pid=process.pid, log=log
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"JupyterLab exited with {process.returncode} before answering:\n"
                        + lab.log_tail()
                    )
                try:
                    urllib.request.urlopen(f"{lab.url}/api/status?token={token}", timeout=5)
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"JupyterLab did not answer on {lab.url} within "
                            f"{START_TIMEOUT:.0f} s:\n" + lab.log_tail()
                        ) from None
                    time.sleep(0.3)
            yield lab
        finally:
            _stop(process, lab)

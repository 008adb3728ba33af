"""``cairn serve --workers N`` as a supervisor: its processes stop when it dies, however it
dies, so the port is free for the next start."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_serve_and_keys import env_for
from tests.cli.test_serve_bind import free_port, running

pytestmark = pytest.mark.slow


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
def test_the_processes_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    port = free_port()
    env = env_for(tmp_path)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    args = ["cairn.cli.main", "serve", "--port", str(port), "--workers", "2"]
    workers: list[int] = []
    with running(args, env, port) as proc:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(workers) < 2:
                workers = [p for p in _children(proc.pid) if _alive(p)]
                time.sleep(0.2)
            assert len(workers) >= 2, workers
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            stopped_by = time.monotonic() + 30
            while time.monotonic() < stopped_by and any(_alive(p) for p in workers):
                time.sleep(0.2)
            assert not any(_alive(p) for p in workers), "a worker process outlived its supervisor"
            with socket.socket() as s:  # the port is free for the next start
                s.bind(("127.0.0.1", port))
        finally:
            for pid in workers:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)

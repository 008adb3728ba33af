"""Run a real ``cairn serve`` in a subprocess on a free loopback port, for benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    database_url: str,
    *,
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    default_settings: bool = False,
) -> Iterator[str]:
    """Start ``cairn serve`` on 127.0.0.1 and yield its base URL; stop it afterwards.

    With ``default_settings`` no ``CAIRN_*`` variable of this process reaches the server (only
    ``env`` and the database/data dir given here), so it runs as a fresh install would; an
    empty ``database_url`` then means the default SQLite file in ``data_dir``.
    """
    with server_process(
        database_url, env=env, data_dir=data_dir, default_settings=default_settings
    ) as (base, _pid):
        yield base


def rss_mb(pid: int) -> dict[str, float]:
    """Resident memory of a process (Linux ``/proc``): now (``rss``) and its peak (``hwm``),
    in MB (10^6 bytes); empty where ``/proc`` is not there."""
    out: dict[str, float] = {}
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out["rss" if key == "VmRSS" else "hwm"] = int(value.split()[0]) * 1024 / 1e6
    return out


def cairn_env(
    database_url: str,
    *,
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    default_settings: bool = False,
) -> dict[str, str]:
    """The environment of a ``cairn`` child process on ``database_url`` / ``data_dir``, quiet
    below warnings; with ``default_settings`` no ``CAIRN_*`` variable of this process reaches
    it; ``env`` last."""
    inherited = {
        k: v for k, v in os.environ.items() if not (default_settings and k.startswith("CAIRN_"))
    }
    child_env = {**inherited, "CAIRN_LOG_LEVEL": "WARNING"}
    if database_url:
        child_env["CAIRN_DATABASE_URL"] = database_url
    if data_dir is not None:
        child_env["CAIRN_DATA_DIR"] = str(data_dir)
    child_env.update(env or {})
    return child_env


@contextmanager
def server_process(
    database_url: str,
    *,
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    default_settings: bool = False,
) -> Iterator[tuple[str, int]]:
    """``running_server``, yielding the base URL and the server's process id (for its RSS)."""
    port = free_port()
    child_env = cairn_env(
        database_url, env=env, data_dir=data_dir, default_settings=default_settings
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn.cli.main",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=child_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"the server exited: {err}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start within 30 s")
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def scratch_postgres(admin_url: str, prefix: str = "cairn_bench") -> Iterator[str]:
    """Create an empty PostgreSQL database on ``admin_url``'s server; drop it afterwards."""
    from cairn.store.scratch import scratch_database

    with scratch_database(admin_url, prefix) as url:
        yield url

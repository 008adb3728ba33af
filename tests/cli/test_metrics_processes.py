"""/metrics counts every server process's requests, whichever process answers the scrape."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _count(text: str, route: str) -> float:
    total = 0.0
    pattern = re.compile(
        r'^cairn_http_requests_total\{[^}]*route="' + re.escape(route) + r'"[^}]*\} (\S+)$',
        re.MULTILINE,
    )
    for value in pattern.findall(text):
        total += float(value)
    return total


@pytest.mark.slow
def test_metrics_sum_over_server_processes(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "CAIRN_DATA_DIR": str(tmp_path / "data"),
        "CAIRN_LOG_LEVEL": "WARNING",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("server did not start")
        # New connections each time, so the kernel spreads them over both processes.
        for _ in range(20):
            with httpx.Client() as c:
                assert c.get(f"{base}/v1/subjects").status_code == 200
        scrapes = []
        for _ in range(6):
            with httpx.Client() as c:
                scrapes.append(c.get(f"{base}/metrics").text)
        for text in scrapes:
            assert _count(text, "/v1/subjects") == 20
        assert "cairn_compile_jobs{" in scrapes[0]
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()

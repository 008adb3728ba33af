"""/metrics counts every server process's requests and domain events (context lanes, ladder runs,
slate evictions), whichever process answers the scrape."""

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


def _sample(text: str, name: str, label: str) -> float:
    """The sum of ``name``'s samples with ``label`` (one per process, or the pooled one)."""
    pattern = re.compile(
        r"^" + re.escape(name) + r"\{[^}]*" + re.escape(label) + r"[^}]*\} (\S+)$", re.MULTILINE
    )
    return sum(float(v) for v in pattern.findall(text))


# A FIFO folder that holds one note at a time, written by the ladder's every run.
NOTES = """
slates:
  - title: Notes
    folders:
      - name: log
        tokenLimit: 12
        evictionPolicy: FIFO
        files:
          - { name: a.md, init: blank }
providers:
  s: { kind: scripted, default: "Noted: the meeting moved to Friday." }
models: {"*": s}
steps:
  - id: note
    if: { then: { write: { to: { slate: Notes, folder: log, file: a.md } } } }
"""


@pytest.mark.slow
def test_metrics_sum_over_server_processes(tmp_path: Path) -> None:
    port = _free_port()
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    (ladders / "notes.yaml").write_text(NOTES)
    env = {
        **os.environ,
        "CAIRN_DATA_DIR": str(tmp_path / "data"),
        "CAIRN_LOG_LEVEL": "WARNING",
        "CAIRN_LADDERS_DIR": str(ladders),
        "CAIRN_EMBEDDER": "none",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    # The database named on the command line is every process's (they read the environment).
    chosen = tmp_path / "chosen.db"
    command = ["serve", "--port", str(port), "--workers", "2", "--database-url"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", *command, f"sqlite:///{chosen}"],
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
        run = {"model": "m", "messages": [{"role": "user", "content": "Когда встреча?"}]}
        context = {"subject_id": "ana", "task": "Where is the meeting?"}
        for _ in range(20):
            with httpx.Client() as c:
                assert c.get(f"{base}/v1/subjects").status_code == 200
        for _ in range(6):  # domain events, spread over both processes the same way
            with httpx.Client(timeout=30) as c:
                assert c.post(f"{base}/v1/context", json=context).status_code == 200
                r = c.post(f"{base}/v1/local/notes/chat/completions", json=run)
                assert r.status_code == 200, r.text
        scrapes = []
        for _ in range(6):
            with httpx.Client() as c:
                scrapes.append(c.get(f"{base}/metrics").text)
        lane = "cairn_context_lane_duration_seconds_count"
        for text in scrapes:
            assert _count(text, "/v1/subjects") == 20
            assert _sample(text, lane, 'lane="long_term"') == 6
            assert _sample(text, "cairn_ladder_runs_total", 'outcome="completed"') == 6
            # Every run after the first evicts the note before it.
            assert _sample(text, "cairn_slate_evictions_total", 'policy="FIFO"') == 5
        assert "cairn_compile_jobs{" in scrapes[0]
        assert chosen.is_file() and not (tmp_path / "data" / "cairn.db").exists()
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()

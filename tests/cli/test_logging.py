"""Process logging as an operator sees it: JSON lines on request, quiet start-up."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cairn.logs import JsonFormatter, configure_logging


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    full = {**os.environ, "CAIRN_DATA_DIR": str(tmp_path / "data"), **env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"server did not start: {proc.communicate()[1]}")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


@pytest.mark.slow
def test_json_logs_are_one_object_per_line(tmp_path: Path) -> None:
    proc, base = _serve(tmp_path, CAIRN_LOG_JSON="true", CAIRN_LOG_LEVEL="INFO")
    try:
        r = httpx.get(f"{base}/v1/subjects", headers={"X-Request-ID": "req-1"})
        assert r.status_code == 200
    finally:
        err = _stop(proc)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "the server logged nothing"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    access = [r for r in records if r["logger"] == "cairn.access" and r["path"] == "/v1/subjects"]
    assert access, records
    assert {"request_id", "tenant", "status", "duration_ms", "ts", "level"} <= set(access[0])
    assert access[0]["tenant"] == "default"
    assert access[0]["status"] == 200 and access[0]["request_id"] == "req-1"
    migrations = [r for r in records if r["logger"] == "cairn.migrations"]
    assert migrations and all(r["message"].startswith("migration applied: ") for r in migrations)
    assert not [r for r in records if r["logger"].startswith("alembic")]
    # Start-up: the address at INFO (not a warning an aggregator would flag), the open mode
    # (no key: anyone on loopback is tenant 'default') at WARNING.
    started = {r["message"].split(" ", 1)[0]: r["level"] for r in records if r["logger"] == "cairn"}
    assert started == {"Cairn": "INFO", "No": "WARNING"}, records


@pytest.mark.slow
def test_the_worker_logs_json_lines_too(tmp_path: Path) -> None:
    """``cairn worker`` with CAIRN_LOG_JSON=true: every line it writes is one JSON object
    (its own messages went to the console as plain text)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "CAIRN_DATA_DIR": str(tmp_path / "data"),
        "CAIRN_EMBEDDER": "none",
        "CAIRN_LOG_JSON": "true",
    }
    done = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "worker", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert any(r["logger"] == "cairn.worker" and r["message"] == "0 job(s) run" for r in records)


def test_start_up_is_quiet_when_up_to_date(tmp_path: Path) -> None:
    proc, _ = _serve(tmp_path, CAIRN_LOG_LEVEL="INFO")
    first = _stop(proc)
    applied = [line for line in first.splitlines() if "migration applied:" in line]
    assert len(applied) >= 8  # one line per revision on a new database
    assert "alembic" not in first
    proc, _ = _serve(tmp_path, CAIRN_LOG_LEVEL="INFO")
    second = _stop(proc)
    assert "migration applied" not in second
    assert "alembic" not in second


def test_json_formatter_keeps_extras_and_every_script() -> None:
    record = logging.LogRecord("cairn.x", logging.INFO, __file__, 1, "héllo %s", ("世界",), None)
    record.tenant = "тенант"
    out = json.loads(JsonFormatter().format(record))
    assert out["message"] == "héllo 世界"
    assert out["tenant"] == "тенант"
    assert out["level"] == "INFO" and out["logger"] == "cairn.x"


def test_configure_logging_silences_alembic(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", json_lines=True)
        logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
        logging.getLogger("cairn.test").info("kept", extra={"k": 1})
        err = capsys.readouterr().err.strip().splitlines()
        assert [json.loads(line)["message"] for line in err] == ["kept"]
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_logging_follows_the_current_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream closed after set-up (a test runner's capture) never breaks later records."""
    import io

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("INFO", json_lines=False)
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("cairn.test").info("after the swap")
    assert second.getvalue() == "INFO cairn.test after the swap\n"


def test_json_lines_logged_while_serving_a_request_name_it(tmp_path: Path) -> None:
    """Only the access line carried the request id and tenant: an error logged by a route
    (a model server failing, say) could not be tied to the request whose reply named it."""
    from fastapi import Depends
    from fastapi.testclient import TestClient

    from cairn.app import create_app
    from cairn.http.auth import require_tenant
    from cairn.services import Services
    from tests.conftest import make_settings

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("cairn.test_request")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    services = Services.from_settings(make_settings(tmp_path))
    app = create_app(services=services)

    def noisy(tenant: str = Depends(require_tenant)) -> dict[str, str]:
        logger.warning("model server failed: HTTP 500 — 失败")
        return {"ok": tenant}

    app.add_api_route("/test/noisy", noisy)
    try:
        with TestClient(app) as client:
            r = client.get("/test/noisy", headers={"X-Request-ID": "req-42"})
            assert r.status_code == 200
            logger.warning("outside any request")
    finally:
        logger.removeHandler(handler)
        services.close()
    inside, outside = (json.loads(line) for line in lines)
    assert inside["request_id"] == "req-42" and inside["tenant"] == "default"
    assert inside["message"] == "model server failed: HTTP 500 — 失败"
    assert "request_id" not in outside and "tenant" not in outside

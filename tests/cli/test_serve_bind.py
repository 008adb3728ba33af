"""``cairn serve`` as a user starts it: open mode (no key) binds loopback only, answers loopback
peers only, and answers only to loopback host names (DNS rebinding)."""

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
import pytest

from cairn.cli.main import is_loopback
from tests.cli.test_serve_and_keys import env_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def interface_address() -> str | None:
    """A non-loopback address of this machine (no packet is sent: UDP connect only routes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


@contextmanager
def running(args: list[str], env: dict[str, str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m ARGS`` until it accepts connections on ``port``; stopped afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_is_loopback_bind() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("localhost") and is_loopback("127.0.0.2")
    for host in ("", " ", "0.0.0.0", "::", "[::]", "10.1.2.3", "myhost", "localhost.example"):
        assert not is_loopback(host), host


@pytest.mark.parametrize("host", ["", "0.0.0.0", "::", "cairn-box", "192.0.2.2"])
def test_serve_without_key_refuses_every_non_loopback_bind(tmp_path: Path, host: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--host", host, "--port", "1"],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "refusing to bind" in proc.stderr and "no API key" in proc.stderr


@pytest.mark.slow
def test_open_server_answers_only_loopback_host_names(tmp_path: Path) -> None:
    port = free_port()
    args = ["cairn.cli.main", "serve", "--port", str(port)]
    with running(args, env_for(tmp_path), port):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/ui/subjects").status_code == 200
        local = httpx.get(f"{base}/ui/subjects", headers={"Host": f"localhost:{port}"})
        assert local.status_code == 200
        assert local.headers["x-frame-options"] == "DENY"
        for path in ("/ui/subjects", "/v1/subjects"):
            r = httpx.get(f"{base}{path}", headers={"Host": f"rebind.example:{port}"})
            assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"


@pytest.mark.slow
def test_open_mode_refuses_remote_peers_whatever_the_bind(tmp_path: Path) -> None:
    """A process manager may bind the ASGI app anywhere (``uvicorn cairn.asgi:app``); with
    no key, a peer reaching it over a non-loopback interface still gets nothing."""
    address = interface_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 interface to connect from")
    port = free_port()
    args = ["uvicorn", "cairn.asgi:app", "--host", "0.0.0.0", "--port", str(port)]
    env = env_for(tmp_path)
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    with running(args, env, port):
        for path in ("/ui/subjects", "/ui/login", "/v1/subjects"):
            r = httpx.get(f"http://{address}:{port}{path}", headers={"Host": "localhost"})
            assert r.status_code == 403, path
            assert r.json()["error"]["code"] == "loopback_only"
        assert httpx.get(f"http://127.0.0.1:{port}/ui/subjects").status_code == 200


@pytest.mark.slow
def test_serve_with_key_binds_everywhere_and_checks_allowed_hosts(tmp_path: Path) -> None:
    port = free_port()
    env = env_for(tmp_path, CAIRN_API_KEY="k-serve-test", CAIRN_ALLOWED_HOSTS="cairn.example")
    args = ["cairn.cli.main", "serve", "--host", "0.0.0.0", "--port", str(port)]
    with running(args, env, port):
        base = f"http://127.0.0.1:{port}"
        auth = {"X-API-Key": "k-serve-test"}
        ok = httpx.get(f"{base}/v1/subjects", headers={**auth, "Host": "cairn.example"})
        assert ok.status_code == 200
        r = httpx.get(f"{base}/v1/subjects", headers={**auth, "Host": "other.example"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"


def test_serve_on_a_port_in_use_says_so_and_exits_1(tmp_path: Path) -> None:
    """A port another process listens on: a clear message and exit 1 (the operation failed),
    not uvicorn's exit 3 (the code of a configuration error) after everything started."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
            env=env_for(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1, proc.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert "another server" in proc.stderr
    assert "OPEN" not in proc.stderr  # nothing will serve: no notice says it will

"""Two versions of Cairn, measured side by side: the same requests, alternating between them.

A shared machine's speed moves while a benchmark runs (on the reference machine the same code
measured 6.8 and 14.0 ms context p50 ten minutes apart), so a before/after of two runs one after
the other measures the machine as much as the change. Here two servers run at once, each from
its own source tree (``PYTHONPATH``: e.g. a ``git worktree`` of the revision before) over its
own database, each ingesting and compiling the same subject (the scale benchmark's episodes)
with its own code; then every request goes to both, in alternating order, one at a time, so
both see the same moments of the machine. Reported per side: p50, p95 and mean; and the
paired difference (A - B per request: positive when B is faster) with the share of requests
where B was faster.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from cairn.bench.context import percentiles, query_text
from cairn.bench.recall import HarnessError
from cairn.bench.scale import MODES, PG_DEFAULT, WARMUP, load_subject
from cairn.bench.server import cairn_env, scratch_postgres, server_process

KINDS = ("context", "search")
Progress = Callable[[str], None]


@contextmanager
def _side(source: str, backend: str, pg_url: str, keyed: bool) -> Iterator[tuple[str, str]]:
    """A lexical server running the code of ``source`` ('': this install) on a fresh database;
    yields its base URL and, when ``keyed``, an API key of the tenant ``default`` made with
    that code's ``cairn keys create`` (else '': open mode)."""
    env = dict(MODES["lexical"])
    if source:  # first on the path, before this install (and anything inherited)
        inherited = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(source).resolve()), inherited) if p
        )
    with ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = ""
        if backend == "postgres":
            url = stack.enter_context(scratch_postgres(pg_url, prefix="cairn_ab"))
        elif backend != "sqlite":
            raise ValueError(f"unknown backend {backend!r} (sqlite or postgres)")
        key = _make_key(env, data_dir, url) if keyed else ""
        base, _pid = stack.enter_context(
            server_process(url, env=env, data_dir=data_dir, default_settings=True)
        )
        yield base, key


def _make_key(env: dict[str, str], data_dir: Path, url: str) -> str:
    """A key of the tenant ``default`` made by ``cairn keys create`` with the side's code."""
    child = cairn_env(url, env=env, data_dir=data_dir, default_settings=True)
    made = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "keys", "create", "--tenant", "default"],
        env=child,
        capture_output=True,
        text=True,
        timeout=120,
    )
    key = next((w for w in made.stdout.split() if w.startswith("cairn_")), "")
    if made.returncode or not key:
        raise HarnessError(f"cairn keys create failed: {made.stderr.strip()[-300:]}")
    return key


def _request(kind: str, subject: str, rng: random.Random) -> Callable[[httpx.Client], Any]:
    """One request of ``kind`` (the scale benchmark's queries), to send to both sides."""
    if kind == "context":
        body = {"subject_id": subject, "task": query_text(rng, rng.randint(3, 7))}
        return lambda c: c.post("/v1/context", json={**body, "max_tokens": 1000})
    params = {"subject_id": subject, "q": query_text(rng, rng.randint(1, 3))}
    return lambda c: c.get("/v1/memories/search", params=params)


def alternate(
    clients: list[httpx.Client], kind: str, subject: str, calls: int
) -> list[list[float]]:
    """Latencies (ms) of ``calls`` requests on each client, after ``WARMUP`` unmeasured ones;
    each request goes to both, the first of the two alternating."""
    rng = random.Random(11)
    times: list[list[float]] = [[], []]
    for i in range(calls + WARMUP):
        send = _request(kind, subject, rng)
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            t0 = time.perf_counter()
            response = send(clients[k])
            elapsed = (time.perf_counter() - t0) * 1000
            if response.status_code >= 300:
                raise HarnessError(f"{response.request.url} → {response.status_code}")
            if i >= WARMUP:
                times[k].append(elapsed)
    return times


def summary(times: list[list[float]]) -> dict[str, Any]:
    """Each side's p50/p95/mean and the paired difference A - B (ms)."""
    sides = {}
    for name, t in zip("ab", times, strict=True):
        p50, p95 = percentiles(t)
        sides[name] = {"p50": p50, "p95": p95, "mean": statistics.fmean(t)}
    diff = [a - b for a, b in zip(*times, strict=True)]
    return {
        **sides,
        "diff_mean": statistics.fmean(diff),
        "diff_median": statistics.median(diff),
        "b_faster": sum(d > 0 for d in diff) / len(diff),
    }


def run(
    source_a: str,
    source_b: str,
    *,
    backend: str = "sqlite",
    size: int = 10_000,
    calls: int = 600,
    kinds: tuple[str, ...] = KINDS,
    pg_url: str = PG_DEFAULT,
    keyed: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Both sides loaded with the same ``size``-episode subject, then each kind measured;
    ``keyed``: every request (the loading too) with an API key (else open mode)."""
    say = progress or (lambda _: None)
    subject = f"subject-{size}"
    out: dict[str, Any] = {"backend": backend, "size": size, "calls": calls, "keyed": keyed}
    with ExitStack() as stack:
        clients = []
        for name, source in (("A", source_a), ("B", source_b)):
            base, key = stack.enter_context(_side(source, backend, pg_url, keyed))
            headers = {"X-API-Key": key} if key else {}
            client = stack.enter_context(httpx.Client(base_url=base, timeout=600, headers=headers))
            version = client.get("/v1/version").json()["version"]
            out.setdefault("versions", []).append(version)
            loaded = load_subject(base, client, subject, size, seed=size)
            say(f"{name} ({version}): {size:,} episodes → {loaded['memories']:,} memories")
            clients.append(client)
        for kind in kinds:
            out[kind] = summary(alternate(clients, kind, subject, calls))
            say(f"{kind}: A - B {out[kind]['diff_mean']:+.2f} ms a request")
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"| {result['backend']}{', keyed' if result.get('keyed') else ''}, "
        f"{result['size']:,}-episode subject, {result['calls']} calls "
        "| A p50 / p95 / mean ms | B p50 / p95 / mean ms | A - B mean / median ms "
        "| B faster |",
        "|---|---|---|---|---|",
    ]
    for kind in KINDS:
        r = result.get(kind)
        if r is None:
            continue
        a, b = r["a"], r["b"]
        lines.append(
            f"| {kind} | {a['p50']:.2f} / {a['p95']:.2f} / {a['mean']:.2f} "
            f"| {b['p50']:.2f} / {b['p95']:.2f} / {b['mean']:.2f} "
            f"| {r['diff_mean']:+.2f} / {r['diff_median']:+.2f} | {r['b_faster']:.0%} |"
        )
    return "\n".join(lines)

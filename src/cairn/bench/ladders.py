"""Ladder runtime overhead per call: one step with one slate read and one slate write.

The model is the deterministic ``scripted`` provider, so what is measured is the runtime's own
cost: claiming the run id, rendering the fields (the slate read), the slate write (JSON
extraction, schema check, eviction, commit) and storing the trace. The scripted provider's own
time is measured apart and subtracted ("overhead"). Optionally the same call end to end through
``cairn serve`` over loopback HTTP.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from cairn.bench.ingest import PG_DEFAULT, _with_pg_database, percentile

LADDER = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
providers:
  offline:
    kind: scripted
    rules:
      - regex: "fact number"
        reply: 'Noted. {"fact": "The bench learnt a durable fact."}'
    default: "?"
models: {"*": offline}
steps:
  - id: answer
    fields:
      - { name: Question, type: text, from: input.context }
      - name: KnownFacts
        type: slateRead
        from: { slate: Memory, folder: facts, file: core.md }
        fallback: "No prior facts available."
    systemPrompt: 'Answer. If you discover a durable fact, emit JSON {"fact": "..."}.'
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: fact
      on: append
      match: {type: object, required: [fact], properties: {fact: {type: string, minLength: 5}}}
"""


def _in_process(
    database_url: str, ladders: Path, data_dir: Path, calls: int, warmup: int
) -> dict[str, float]:
    from cairn.config import Settings
    from cairn.ladders.providers import ChatRequest
    from cairn.ladders.runtime import RunRequest
    from cairn.services import Services

    services = Services.from_settings(
        Settings.model_validate(
            {"data_dir": data_dir, "database_url": database_url, "ladders_dir": ladders}
        )
    )
    try:
        ladder = services.ladders.get("bench")
        runtime = services.ladder_runtime
        provider, model = ladder.router.resolve("gpt-4o")
        totals: list[float] = []
        model_times: list[float] = []
        phases: dict[str, list[float]] = {"read": [], "write": [], "rest": []}
        for i in range(warmup + calls):
            req = RunRequest(
                tenant="bench",
                ladder="bench",
                model="gpt-4o",
                messages=[{"role": "user", "content": f"fact number {i}?"}],
            )
            t0 = time.perf_counter()
            out = runtime.run(ladder, req)
            elapsed = (time.perf_counter() - t0) * 1000
            # The model's own time for the same prompt, measured apart.
            messages = out.trace["steps"][0]["messages"]  # type: ignore[index]
            t1 = time.perf_counter()
            provider.complete(ChatRequest(model, messages))
            model_ms = (time.perf_counter() - t1) * 1000
            if i >= warmup:
                totals.append(elapsed)
                model_times.append(model_ms)
                t = out.trace["steps"][0]["timings_ms"]  # type: ignore[index]
                phases["read"].append(t["render"])
                phases["write"].append(t["writes"])
                phases["rest"].append(elapsed - t["render"] - t["writes"] - t["model"])
                assert out.trace["steps"][0]["writes"][0]["written"]  # type: ignore[index]
        overheads = [t - m for t, m in zip(totals, model_times, strict=True)]
        return {
            "p50_ms": percentile(totals, 50),
            "p95_ms": percentile(totals, 95),
            "model_p50_ms": percentile(model_times, 50),
            "overhead_p50_ms": percentile(overheads, 50),
            "overhead_p95_ms": percentile(overheads, 95),
            # Medians of where the time goes: the slate read (field rendering), the slate write
            # (extraction, schema, eviction, commit), and the rest (run claim, trace, finish).
            "slate_read_p50_ms": percentile(phases["read"], 50),
            "slate_write_p50_ms": percentile(phases["write"], 50),
            "bookkeeping_p50_ms": percentile(phases["rest"], 50),
        }
    finally:
        services.close()


def _over_http(
    database_url: str, ladders: Path, data_dir: Path, calls: int, warmup: int
) -> dict[str, float]:
    from cairn.bench.server import running_server

    env = {"CAIRN_LADDERS_DIR": str(ladders)}
    with (
        running_server(database_url, env=env, data_dir=data_dir) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        latencies = []
        for i in range(warmup + calls):
            body = {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": f"fact number {i}?"}],
            }
            t0 = time.perf_counter()
            r = client.post("/v1/local/bench/chat/completions", json=body)
            elapsed = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            if i >= warmup:
                latencies.append(elapsed)
        return {"p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95)}


def run(
    *,
    calls: int = 1000,
    warmup: int = 50,
    backends: tuple[str, ...] = ("sqlite",),
    pg_url: str = PG_DEFAULT,
    http: bool = True,
) -> list[dict[str, Any]]:
    """Measure and print the table; returns its rows."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ladders = Path(tmp) / "ladders"
        ladders.mkdir()
        (ladders / "bench.yaml").write_text(LADDER)
        for backend in backends:

            def measure(url: str, backend: str = backend) -> dict[str, float]:
                data_dir = Path(tmp) / f"data-{backend}"
                result = _in_process(url, ladders, data_dir, calls, warmup)
                rows.append({"backend": backend, "path": "runtime (in process)", **result})
                if http:
                    # A fresh database so the server starts from the same state.
                    http_url = url
                    if backend == "sqlite":
                        http_url = f"sqlite:///{Path(tmp) / 'http.db'}"
                    rows.append(
                        {
                            "backend": backend,
                            "path": "POST /v1/local/bench (HTTP)",
                            **_over_http(http_url, ladders, data_dir, calls, warmup),
                        }
                    )
                return result

            if backend == "sqlite":
                measure(f"sqlite:///{Path(tmp) / 'bench.db'}")
            else:
                _with_pg_database(pg_url, measure)
    table = Table(
        "backend",
        "path",
        "p50 ms",
        "p95 ms",
        "model p50 ms",
        "overhead p50 ms",
        "overhead p95 ms",
        title=f"Ladder call, {calls} calls (scripted model)",
    )
    for r in rows:
        table.add_row(
            r["backend"],
            r["path"],
            f"{r['p50_ms']:.2f}",
            f"{r['p95_ms']:.2f}",
            *(
                f"{r[k]:.2f}" if k in r else "—"
                for k in ("model_p50_ms", "overhead_p50_ms", "overhead_p95_ms")
            ),
        )
    console = Console()
    console.print(table)
    split = Table(
        "backend",
        "slate read p50 ms",
        "slate write p50 ms",
        "run bookkeeping p50 ms",
        title="Where the in-process time goes",
    )
    for r in rows:
        if "slate_read_p50_ms" in r:
            split.add_row(
                r["backend"],
                f"{r['slate_read_p50_ms']:.2f}",
                f"{r['slate_write_p50_ms']:.2f}",
                f"{r['bookkeeping_p50_ms']:.2f}",
            )
    console.print(split)
    return rows

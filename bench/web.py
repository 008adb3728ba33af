"""Web inspector benchmark: server-side latency of the main pages over loopback HTTP.

    python bench/web.py [--requests 200] [--episodes 1000] [--database-url URL]

Starts a real ``cairn serve`` (SQLite in a temporary directory unless ``--database-url``), with a
key and the example ladders, seeds it through the HTTP API (100 small subjects, one subject with
``--episodes`` chat messages compiled into memories, two ladder runs), signs in through the
sign-in form like a browser, then fetches each page ``--requests`` times in sequence and prints
p50/p95 per page, next to the JSON API call that reads the same data. Results:
docs/benchmarks.md ("Web inspector").
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from cairn.bench.server import running_server

ROOT = Path(__file__).resolve().parents[1]
KEY = "bench-web-key-0123456789abcdef"
TEXTS = [
    "I live in Lisbon and work at Globex.", "My favourite food is grilled sardines.",
    "We deploy every Tuesday at 10am.", "The invoice for May had a duplicate charge.",
    "I moved to Porto last month.", "Can you remind me about the deploy schedule?",
]


def seed(api: httpx.Client, episodes: int) -> None:
    for start in range(0, 100, 20):
        api.post("/v1/episodes/batch", json={"episodes": [
            {"subject_id": f"user-{i:03d}", "source": "bench", "type": "message",
             "payload": {"text": f"hello {j}"}}
            for i in range(start, start + 20) for j in range(5)
        ]}).raise_for_status()
    for start in range(0, episodes, 100):
        api.post("/v1/episodes/batch", json={"episodes": [
            {"subject_id": "big", "source": "chat", "type": "message", "session_id": f"s{j // 50}",
             "payload": {"role": "user", "name": "Ana", "content": f"{TEXTS[j % len(TEXTS)]} #{j}"}}
            for j in range(start, min(start + 100, episodes))
        ]}).raise_for_status()
    while api.post("/v1/memories/compile", json={"subject_id": "big"}).json()["has_more"]:
        pass
    for q in ("What is the capital of France?", "What is the capital of Germany?"):
        api.post("/v1/local/memory-ladder/chat/completions",
                 json={"messages": [{"role": "user", "content": q}]}).raise_for_status()


def timed(client: httpx.Client, url: str, n: int) -> tuple[float, float]:
    client.get(url).raise_for_status()  # warm up
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ladders = Path(tmp) / "ladders"
        shutil.copytree(ROOT / "examples" / "ladders", ladders)
        url = args.database_url or f"sqlite:///{tmp}/cairn.db"
        env = {"CAIRN_API_KEY": KEY, "CAIRN_LADDERS_DIR": str(ladders)}
        with running_server(url, env=env, data_dir=Path(tmp)) as base:
            with httpx.Client(base_url=base, headers={"X-API-Key": KEY}, timeout=60) as api:
                seed(api, args.episodes)
                run_id = api.get("/v1/runs").json()["runs"][0]["id"]
            with httpx.Client(base_url=base, timeout=60) as web:
                token = re.search(r'name="csrf" value="([^"]+)"', web.get("/ui/login").text)
                assert token is not None
                web.post("/ui/login", data={"csrf": token.group(1), "api_key": KEY})
                with httpx.Client(base_url=base, headers={"X-API-Key": KEY}, timeout=60) as api:
                    rows = [
                        ("subjects (101)", "/ui/subjects", "/v1/subjects?limit=50"),
                        (f"timeline ({args.episodes} episodes)", "/ui/subjects/big",
                         "/v1/timeline?subject_id=big&limit=100"),
                        ("context preview", "/ui/context?subject_id=big&query=where+does+Ana+live",
                         None),
                        ("template form", "/ui/templates/customer-support-handoff",
                         "/v1/memory-templates/customer-support-handoff"),
                        ("Slate Inspector", "/ui/slates/memory-ladder/Memory",
                         "/v1/slates/memory-ladder/Memory"),
                        ("run trace", f"/ui/runs/{run_id}", f"/v1/runs/{run_id}"),
                    ]
                    print("| page | page p50 ms | page p95 ms | JSON API p50 ms | "
                          "JSON API p95 ms |")
                    print("|---|---:|---:|---:|---:|")
                    for name, page, json_url in rows:
                        p50, p95 = timed(web, page, args.requests)
                        if json_url:
                            a50, a95 = timed(api, json_url, args.requests)
                            ref = f"{a50:.2f} | {a95:.2f}"
                        else:
                            ref = "— | —"
                        print(f"| {name} | {p50:.2f} | {p95:.2f} | {ref} |")


if __name__ == "__main__":
    main()

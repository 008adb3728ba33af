"""Compile throughput and search latency with N memories in one subject.

A synthetic conversation (seeded, so every run sees the same corpus) of N turns in sessions of
20 is ingested as N episodes into one subject, compiled with the heuristic compiler (timed:
episodes/s), and then searched with questions built from the same vocabulary (p50/p95 of
``search_memories`` in-process, lexical and — with an embedder — hybrid).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import HashingEmbedder, LocalEmbedder
from cairn.engine.search import embed_memories, search_memories
from cairn.engine.search_caches import SearchCaches
from cairn.store import Store, open_store

TENANT = "bench"
_NOUNS = [
    "garden",
    "painting",
    "guitar",
    "hiking",
    "camping",
    "dog",
    "cat",
    "school",
    "job",
    "interview",
    "museum",
    "concert",
    "beach",
    "mountain",
    "recipe",
    "bakery",
    "marathon",
    "book",
    "novel",
    "poem",
    "photo",
    "camera",
    "bike",
    "car",
    "trip",
    "vacation",
    "festival",
    "family",
    "sister",
    "brother",
    "mother",
    "father",
    "friend",
    "team",
    "project",
    "meeting",
    "conference",
    "workshop",
    "adoption",
    "agency",
    "shelter",
    "charity",
    "volunteer",
    "class",
    "course",
    "degree",
    "exam",
    "piano",
    "violin",
    "dance",
    "yoga",
    "pottery",
    "sculpture",
    "sunset",
    "sunrise",
    "lake",
    "river",
    "forest",
    "park",
    "city",
    "village",
    "country",
    "island",
    "hotel",
    "restaurant",
    "coffee",
    "tea",
    "pizza",
    "pasta",
    "salad",
    "cake",
    "cookie",
    "birthday",
    "wedding",
    "anniversary",
    "holiday",
    "christmas",
    "summer",
    "winter",
    "spring",
    "autumn",
    "rain",
    "snow",
    "storm",
    "game",
    "match",
    "season",
    "league",
    "coach",
    "painting",
    "canvas",
    "gallery",
    "exhibition",
    "award",
    "prize",
    "scholarship",
    "startup",
    "company",
    "office",
    "manager",
    "doctor",
    "nurse",
    "hospital",
    "clinic",
    "therapy",
    "support",
    "group",
    "counseling",
    "parade",
    "pride",
    "community",
]
_VERBS = [
    "visited",
    "painted",
    "played",
    "joined",
    "started",
    "finished",
    "loved",
    "enjoyed",
    "bought",
    "made",
    "cooked",
    "baked",
    "read",
    "wrote",
    "watched",
    "learned",
    "taught",
    "organized",
    "attended",
    "hosted",
    "planned",
    "booked",
    "found",
    "lost",
    "won",
    "celebrated",
    "adopted",
    "volunteered",
    "climbed",
    "ran",
    "swam",
    "traveled",
    "moved",
    "signed",
]
_NAMES = ["Alice", "Bruno", "Chen", "Dana"]


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Pronounceable pseudo-words; used with Zipf weights, like real text's word counts."""
    onsets = [
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "br",
        "st",
        "tr",
        "pl",
        "gr",
    ]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou"]
    words: list[str] = []
    seen = set()
    while len(words) < size:
        w = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.choice((2, 3))))
        w += rng.choice(("", "n", "r", "st", "l"))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


_RNG_SEED = 7


def _corpus_words(seed: int) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    vocab = _NOUNS + _VERBS + _vocabulary(rng)
    rng.shuffle(vocab)
    weights = [1.0 / (rank + 10) for rank in range(len(vocab))]
    return vocab, weights


def synthetic_episodes(n: int, subject: str, seed: int = _RNG_SEED) -> list[NewEpisode]:
    """``n`` turns of a seeded conversation: a speaker, a date, 8 to 20 Zipf-distributed words."""
    rng = random.Random(seed)
    vocab, weights = _corpus_words(seed)
    start = datetime(2023, 1, 1, 9, tzinfo=UTC)
    scope = Scope.for_subject(subject)
    out = []
    for i in range(n):
        speaker = _NAMES[i % 2] if (i // 200) % 2 == 0 else _NAMES[2 + i % 2]
        words = rng.choices(vocab, weights=weights, k=rng.randint(8, 20))
        text = f"I {' '.join(words)}."
        out.append(
            NewEpisode(
                scope=scope,
                source="bench",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "name": speaker, "content": text}]},
                session_id=f"s{i // 20}",
                occurred_at=start + timedelta(days=i // 20, seconds=i % 20),
            )
        )
    return out


def questions(n: int, seed: int = 11, corpus: int = 10_000) -> list[str]:
    """Questions about things said in the corpus: two or three words of one random turn."""
    episodes = synthetic_episodes(corpus, "q")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ep = rng.choice(episodes)
        msg = ep.payload["messages"][0]
        words = msg["content"].rstrip(".").split()[1:]
        picked = rng.sample(words, k=min(len(words), rng.choice((2, 3))))
        out.append(f"When did {msg['name']} talk about the {' and the '.join(picked)}?")
    return out


def embedder_named(name: str) -> Any:
    if name == "none":
        return None
    if name == "onnx":
        from cairn.engine.embedders import OnnxEmbedder

        return OnnxEmbedder()
    if name == "local":
        return LocalEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    raise ValueError(f"unknown embedder {name!r}: none, onnx, local or hashing")


class _all_cores:
    def __enter__(self) -> None:
        try:
            import torch
        except ImportError:
            self.threads = None
            return
        self.threads = torch.get_num_threads()
        torch.set_num_threads(2)

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p * (len(ordered) - 1))]


def other_tenants(store: Store, count: int) -> None:
    """``count`` more tenants with one compiled memory each (on SQLite each gets its own
    FTS5 index and triggers, whose cost on writes grows with their number)."""
    for i in range(count):
        tenant = f"other-{i}"
        scope = Scope.for_subject("s")
        store.episodes.append_many(tenant, synthetic_episodes(1, "s", seed=i))
        compile_scope(store, tenant, scope)


def measure(
    store: Store, memories: int, queries: int, embedder: Any, tenants: int = 1
) -> dict[str, Any]:
    other_tenants(store, tenants - 1)
    subject = f"bench-{uuid.uuid4().hex[:8]}"
    scope = Scope.for_subject(subject)
    episodes = synthetic_episodes(memories, subject)
    for start in range(0, len(episodes), 1000):
        store.episodes.append_many(TENANT, episodes[start : start + 1000])
    t0 = time.perf_counter()
    while compile_scope(store, TENANT, scope).has_more:
        pass
    compile_s = time.perf_counter() - t0
    result: dict[str, Any] = {
        "episodes": memories,
        "memories": store.memories.count(TENANT, scope),
        "compile_eps": memories / compile_s,
    }
    qs = questions(queries)
    modes: list[tuple[str, Any]] = [("lexical", None)]
    if embedder is not None:
        t1 = time.perf_counter()
        with _all_cores():  # the bulk embedding may use both cores; queries use one
            embed_memories(store, embedder, TENANT, scope)
        result["embed_s"] = time.perf_counter() - t1
        modes.append(("hybrid", embedder))
    for mode, emb in modes:
        # A server's caches: the partition's matrix is read once (query embeddings are not
        # reused: every measured query differs from the warm-up's).
        caches = SearchCaches()
        try:
            for q in qs[:20]:
                search_memories(store, TENANT, scope, q, limit=10, embedder=emb, caches=caches)
            lat, cpu = [], []
            for q in qs:
                t, c = time.perf_counter(), time.thread_time()
                search_memories(
                    store, TENANT, scope, q + " ", limit=10, embedder=emb, caches=caches
                )
                lat.append((time.perf_counter() - t) * 1000)
                cpu.append((time.thread_time() - c) * 1000)
        finally:
            caches.close()
        result[f"{mode}_p50"] = statistics.median(lat)
        result[f"{mode}_p95"] = _percentile(lat, 0.95)
        # CPU time of the searching thread: what the latency is on an idle machine
        # (the reference machine is shared; wall time includes waiting for a core).
        result[f"{mode}_cpu_p50"] = statistics.median(cpu)
        result[f"{mode}_cpu_p95"] = _percentile(cpu, 0.95)
    return result


def run(
    *,
    memories: int,
    queries: int,
    embedder: Any,
    backends: tuple[str, ...],
    pg_url: str,
    tenants: int = 1,
) -> list[dict[str, Any]]:
    from contextlib import ExitStack

    from cairn.store.scratch import scratch_database

    console = Console(width=160)
    rows = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            with ExitStack() as stack:
                if backend == "sqlite":
                    url = f"sqlite:///{Path(tmp) / 'bench.db'}"
                else:
                    url = stack.enter_context(scratch_database(pg_url))
                store = open_store(url)
                try:
                    row = measure(store, memories, queries, embedder, tenants)
                finally:
                    store.close()
            row["backend"] = backend
            rows.append(row)
    table = Table(
        title=f"compile + search, {memories} episodes in one subject, "
        f"{tenants} tenant{'s' if tenants > 1 else ''}"
    )
    for col in (
        "backend",
        "memories",
        "compile ep/s",
        "lexical p50/p95 ms",
        "lexical CPU p50/p95 ms",
        "hybrid p50/p95 ms",
        "hybrid CPU p50/p95 ms",
    ):
        table.add_column(col)

    def pair(r: dict[str, Any], key: str) -> str:
        if f"{key}_p50" not in r:
            return "-"
        return f"{r[f'{key}_p50']:.2f} / {r[f'{key}_p95']:.2f}"

    for r in rows:
        table.add_row(
            r["backend"],
            str(r["memories"]),
            f"{r['compile_eps']:.0f}",
            pair(r, "lexical"),
            pair(r, "lexical_cpu"),
            pair(r, "hybrid"),
            pair(r, "hybrid_cpu"),
        )
    console.print(table)
    return rows

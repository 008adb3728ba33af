"""Concurrent appends to one folder, from threads and from processes, on both backends: nothing
is lost (every entry is either present or recorded as evicted) and the limit always holds."""

from __future__ import annotations

import multiprocessing
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cairn.slates.config import parse_slates
from cairn.slates.service import Slates
from cairn.store import Store
from tests.slates import _workers
from tests.slates.conftest import count

T = "tenant"


def slate_dict(limit: int, policy: str = "FIFO") -> dict[str, Any]:
    return {
        "title": "S",
        "folders": [
            {
                "name": "f",
                "tokenLimit": limit,
                "evictionPolicy": policy,
                "files": [{"name": "a"}, {"name": "b"}],
            }
        ],
    }


def check_nothing_lost(slates: Slates, ladder: str, written: set[str], limit: int) -> int:
    texts = {f: slates.read_file(T, ladder, "S", "f", f, peek=True) for f in ("a", "b")}
    present = [line for text in texts.values() for line in text.split("\n") if line]
    evicted = [e.preview for e in slates.evictions(T, ladder, "S", limit=1000)]
    assert len(present) == len(set(present)) and len(evicted) == len(set(evicted))
    assert set(present) | set(evicted) == written
    assert not set(present) & set(evicted)
    usage = sum(count(t) for t in texts.values())
    assert usage <= limit
    assert slates.tree(T, ladder, "S")["tokens"] == usage
    return len(evicted)


@pytest.mark.parametrize(("limit", "expect_evictions"), [(60, True), (100_000, False)])
def test_concurrent_thread_appends(store: Store, limit: int, expect_evictions: bool) -> None:
    slates = Slates(store)
    ladder = f"threads-{uuid.uuid4().hex[:8]}"
    slates.declare(ladder, parse_slates([slate_dict(limit)], "t"))

    def worker(w: int) -> list[str]:
        out = []
        for i in range(12):
            text = f"t{w}-{i}"
            slates.write(T, ladder, "S", "f", "ab"[i % 2], text)
            out.append(text)
        return out

    with ThreadPoolExecutor(6) as pool:
        written = {t for batch in pool.map(worker, range(6)) for t in batch}
    evicted = check_nothing_lost(slates, ladder, written, limit)
    assert (evicted > 0) is expect_evictions


def test_concurrent_process_appends(store: Store, db_url: str) -> None:
    slates = Slates(store)
    ladder = f"procs-{uuid.uuid4().hex[:8]}"
    spec = slate_dict(40, "LRU")
    slates.declare(ladder, parse_slates([spec], "t"))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        done = pool.starmap(
            _workers.append_many, [(db_url, ladder, spec, f"p{w}", 15) for w in range(3)]
        )
    assert done == [15, 15, 15]
    written = {f"p{w}-{i}" for w in range(3) for i in range(15)}
    assert check_nothing_lost(slates, ladder, written, 40) > 0

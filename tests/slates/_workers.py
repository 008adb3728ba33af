"""Code run in child processes by the concurrency tests (importable by ``spawn``)."""

from __future__ import annotations

from typing import Any

from cairn.slates.config import parse_slates
from cairn.slates.service import Slates
from cairn.store import open_store


def append_many(url: str, ladder: str, slate: dict[str, Any], prefix: str, n: int) -> int:
    store = open_store(url, migrate=False)
    try:
        slates = Slates(store)
        slates.declare(ladder, parse_slates([slate], "worker"))
        files = [f["name"] for f in slate["folders"][0]["files"]]
        for i in range(n):
            slates.write(
                "tenant", ladder, slate["title"], "f", files[i % len(files)], f"{prefix}-{i}"
            )
        return n
    finally:
        store.close()

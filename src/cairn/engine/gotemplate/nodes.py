"""The parse tree of a Go template."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class TextNode:
    text: str


@dataclass(slots=True)
class FieldNode:
    """``.A.B``: a chain of field names evaluated on dot."""

    names: list[str]
    pos: int


@dataclass(slots=True)
class VariableNode:
    """``$x.A.B`` (``$`` alone is the template's data)."""

    name: str
    names: list[str]
    pos: int


@dataclass(slots=True)
class DotNode:
    pos: int


@dataclass(slots=True)
class IdentifierNode:
    """A function name."""

    name: str
    pos: int


@dataclass(slots=True)
class LiteralNode:
    value: Any
    pos: int


@dataclass(slots=True)
class ChainNode:
    """``(pipeline).A.B``."""

    pipe: PipeNode
    names: list[str]
    pos: int


Operand = FieldNode | VariableNode | DotNode | IdentifierNode | LiteralNode | ChainNode


@dataclass(slots=True)
class CommandNode:
    args: list[Operand]
    pos: int


@dataclass(slots=True)
class PipeNode:
    """Commands joined by ``|``, optionally declaring (``:=``) or assigning (``=``) variables."""

    cmds: list[CommandNode]
    pos: int
    decls: list[str] = field(default_factory=list)
    assign: bool = False


@dataclass(slots=True)
class ActionNode:
    pipe: PipeNode
    pos: int


@dataclass(slots=True)
class BranchNode:
    """``if``, ``with`` or ``range``: a pipeline, a body and an optional ``else`` body."""

    kind: str
    pipe: PipeNode
    body: list[Node]
    else_body: list[Node]
    pos: int


@dataclass(slots=True)
class LoopControlNode:
    """``break`` or ``continue`` inside ``range``."""

    kind: str
    pos: int


Node = TextNode | ActionNode | BranchNode | LoopControlNode

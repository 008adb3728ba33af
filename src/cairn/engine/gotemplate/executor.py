"""Executing a parsed Go template over data, as ``text/template`` with
``Option("missingkey=error")``: an unknown struct field or a missing map key is an error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cairn.engine.gotemplate.builtins import LAZY, FunctionError
from cairn.engine.gotemplate.errors import TemplateExecError
from cairn.engine.gotemplate.nodes import (
    ActionNode,
    BranchNode,
    ChainNode,
    CommandNode,
    DotNode,
    FieldNode,
    IdentifierNode,
    LiteralNode,
    LoopControlNode,
    Node,
    Operand,
    PipeNode,
    TextNode,
    VariableNode,
)
from cairn.engine.gotemplate.values import GoStruct, format_value, truth, type_name

_NO_VALUE = object()  # no piped value yet
MAX_OUTPUT_CHARS = 10_000_000  # a runaway template stops here instead of filling memory


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Executor:
    """Runs one template tree; ``functions`` by name."""

    def __init__(self, source: str, functions: Mapping[str, Callable[..., Any]]) -> None:
        self.source = source
        self.functions = functions
        self.out: list[str] = []
        self.size = 0
        self.vars: list[tuple[str, Any]] = []

    def error(self, message: str, pos: int) -> TemplateExecError:
        return TemplateExecError(message, self.source, pos)

    def run(self, nodes: list[Node], data: Any) -> str:
        self.vars = [("$", data)]
        self.walk(nodes, data)
        return "".join(self.out)

    def emit(self, text: str, pos: int) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT_CHARS:
            raise self.error(f"output is over {MAX_OUTPUT_CHARS} characters", pos)
        self.out.append(text)

    def walk(self, nodes: list[Node], dot: Any) -> None:
        for node in nodes:
            if isinstance(node, TextNode):
                self.emit(node.text, 0)
            elif isinstance(node, ActionNode):
                value = self.pipe(node.pipe, dot)
                if not node.pipe.decls:
                    self.emit("<no value>" if value is None else format_value(value), node.pos)
            elif isinstance(node, BranchNode):
                self.branch(node, dot)
            elif isinstance(node, LoopControlNode):
                raise _Break() if node.kind == "break" else _Continue()

    def scoped(self, nodes: list[Node], dot: Any) -> None:
        mark = len(self.vars)
        try:
            self.walk(nodes, dot)
        finally:
            del self.vars[mark:]

    def branch(self, node: BranchNode, dot: Any) -> None:
        mark = len(self.vars)
        try:
            if node.kind == "range":
                self.range(node, dot, mark)
                return
            value = self.pipe(node.pipe, dot)
            if truth(value):
                self.scoped(node.body, value if node.kind == "with" else dot)
            else:
                self.scoped(node.else_body, dot)
        finally:
            del self.vars[mark:]

    def range(self, node: BranchNode, dot: Any, mark: int) -> None:
        value = self.pipe(node.pipe, dot, declare=False)
        if isinstance(value, dict):
            pairs: list[tuple[Any, Any]] = [(k, value[k]) for k in sorted(value, key=str)]
        elif isinstance(value, list | tuple):
            pairs = list(enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            pairs = [(i, i) for i in range(value)]
        elif value is None:
            pairs = []
        else:
            raise self.error(f"range can't iterate over {format_value(value)}", node.pos)
        if not pairs:
            self.scoped(node.else_body, dot)
            return
        decls = node.pipe.decls
        for key, elem in pairs:
            del self.vars[mark:]
            if len(decls) == 1:
                self.vars.append((decls[0], elem))
            elif len(decls) == 2:
                self.vars.extend([(decls[0], key), (decls[1], elem)])
            try:
                self.scoped(node.body, elem)
            except _Continue:
                continue
            except _Break:
                break

    # ----------------------------------------------------------------------- pipelines

    def pipe(self, pipe: PipeNode, dot: Any, *, declare: bool = True) -> Any:
        value: Any = _NO_VALUE
        for cmd in pipe.cmds:
            value = self.command(cmd, dot, value)
        if declare and pipe.decls:
            if pipe.assign:
                self.assign(pipe.decls[0], value, pipe.pos)
            else:
                self.vars.append((pipe.decls[0], value))
        return value

    def assign(self, name: str, value: Any, pos: int) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise self.error(f"undefined variable {name!r}", pos)  # pragma: no cover - parser checks

    def command(self, cmd: CommandNode, dot: Any, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, IdentifierNode):
            return self.call(first, cmd.args[1:], dot, final)
        if len(cmd.args) > 1 or final is not _NO_VALUE:
            raise self.error(f"can't give argument to non-function {self.text_of(first)}", cmd.pos)
        return self.operand(first, dot)

    def call(self, ident: IdentifierNode, args: list[Operand], dot: Any, final: Any) -> Any:
        name = ident.name
        if name in LAZY:
            nodes: list[Any] = list(args)
            if final is not _NO_VALUE:
                nodes.append(("value", final))
            if not nodes:
                raise self.error(f"{name}: wrong number of args: want at least 1 got 0", ident.pos)
            value: Any = None
            for node in nodes:
                value = node[1] if isinstance(node, tuple) else self.operand(node, dot)
                if truth(value) == (name == "or"):
                    return value
            return value
        values = [self.operand(a, dot) for a in args]
        if final is not _NO_VALUE:
            values.append(final)
        try:
            return self.functions[name](*values)
        except FunctionError as exc:
            raise self.error(f"error calling {name}: {exc}", ident.pos) from None
        except TypeError as exc:
            raise self.error(f"wrong number or type of args for {name}: {exc}", ident.pos) from None

    def operand(self, node: Operand, dot: Any) -> Any:
        if isinstance(node, FieldNode):
            return self.fields(dot, node.names, node.pos)
        if isinstance(node, VariableNode):
            return self.fields(self.variable(node), node.names, node.pos)
        if isinstance(node, DotNode):
            return dot
        if isinstance(node, LiteralNode):
            return node.value
        if isinstance(node, ChainNode):
            return self.fields(self.pipe(node.pipe, dot), node.names, node.pos)
        return self.call(node, [], dot, _NO_VALUE)  # a function named as an argument

    def variable(self, node: VariableNode) -> Any:
        for name, value in reversed(self.vars):
            if name == node.name:
                return value
        raise self.error(f"undefined variable {node.name!r}", node.pos)  # pragma: no cover

    def fields(self, value: Any, names: list[str], pos: int) -> Any:
        for name in names:
            value = self.field(value, name, pos)
        return value

    def field(self, value: Any, name: str, pos: int) -> Any:
        if isinstance(value, GoStruct):
            if name in value.fields:
                return value.fields[name]
            if name in value.methods:
                return value.methods[name]()
            raise self.error(f"can't evaluate field {name} in type {value.type_name}", pos)
        if isinstance(value, dict):
            if name in value:
                return value[name]
            raise self.error(f'map has no entry for key "{name}"', pos)
        if value is None:
            raise self.error(f"nil pointer evaluating {name}", pos)
        raise self.error(f"can't evaluate field {name} in type {type_name(value)}", pos)

    def text_of(self, node: Operand) -> str:
        if isinstance(node, FieldNode):
            return "." + ".".join(node.names)
        if isinstance(node, VariableNode):
            return node.name + "".join("." + n for n in node.names)
        if isinstance(node, LiteralNode):
            return format_value(node.value)
        return "."

"""Parsing lexed Go template source into a tree (see ``nodes``).

Supported: text, actions with pipelines, ``if`` / ``else if`` / ``else``, ``with`` / ``else
with`` / ``else``, ``range`` (with ``$i, $e :=`` or ``$e :=``) / ``else``, ``break`` and
``continue``, variables (``$x := …``, ``$x = …``), parenthesised pipelines, comments and trim
markers. ``define``, ``template`` and ``block`` (named templates) are refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from cairn.engine.gotemplate.errors import TemplateSyntaxError
from cairn.engine.gotemplate.lexer import Action, Text, Token, lex
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


def parse(source: str, functions: Iterable[str]) -> list[Node]:
    """The tree of ``source``; ``functions`` are the names a template may call."""
    return _Parser(source, set(functions)).parse()


class _Parser:
    def __init__(self, source: str, functions: set[str]) -> None:
        self.source = source
        self.functions = functions
        self.segments = lex(source)
        self.i = 0
        self.scopes: list[list[str]] = [["$"]]
        self.loops = 0

    def error(self, message: str, pos: int) -> TemplateSyntaxError:
        return TemplateSyntaxError(message, self.source, pos)

    def parse(self) -> list[Node]:
        nodes, stop = self.parse_list()
        if stop is not None:
            raise self.error(f"unexpected {{{{{stop.tokens[0].value}}}}}", stop.pos)
        return nodes

    def parse_list(self) -> tuple[list[Node], Action | None]:
        """Nodes up to ``{{end}}`` / ``{{else …}}`` (returned, unconsumed) or the end."""
        nodes: list[Node] = []
        while self.i < len(self.segments):
            seg = self.segments[self.i]
            if isinstance(seg, Text):
                nodes.append(TextNode(seg.text))
                self.i += 1
                continue
            if not seg.tokens:
                raise self.error("missing value for command", seg.pos)
            first = seg.tokens[0]
            if first.kind == "KEYWORD" and first.value in ("end", "else"):
                return nodes, seg
            self.i += 1
            nodes.append(self.parse_action(seg, first))
        return nodes, None

    def parse_action(self, seg: Action, first: Token) -> Node:
        if first.kind != "KEYWORD":
            pipe = self.parse_pipe(seg.tokens, seg.pos, decls_ok=True)
            return ActionNode(pipe, seg.pos)
        word = str(first.value)
        if word in ("if", "with", "range"):
            return self.parse_branch(word, seg.tokens[1:], seg.pos)
        if word in ("break", "continue"):
            if self.loops == 0:
                raise self.error(f"{{{{{word}}}}} outside {{{{range}}}}", seg.pos)
            if len(seg.tokens) > 1:
                raise self.error(f"unexpected {self.describe(seg.tokens[1])} in {word}", seg.pos)
            return LoopControlNode(word, seg.pos)
        raise self.error(
            f"{{{{{word}}}}} is not supported (named templates are not available)", seg.pos
        )

    def parse_branch(self, kind: str, tokens: list[Token], pos: int) -> BranchNode:
        if not tokens:
            raise self.error(f"missing value for {kind}", pos)
        self.scopes.append([])
        pipe = self.parse_pipe(tokens, pos, decls_ok=True, in_range=kind == "range")
        if kind == "range":
            self.loops += 1
        body, stop = self.parse_list()
        if kind == "range":
            self.loops -= 1
        if stop is None:
            raise self.error(f"unexpected end of template: {{{{{kind}}}}} has no {{{{end}}}}", pos)
        else_body: list[Node] = []
        self.i += 1
        if stop.tokens[0].value == "else":
            rest = stop.tokens[1:]
            chained = rest[:1] and rest[0].kind == "KEYWORD" and rest[0].value in ("if", "with")
            if chained and kind != "range":
                # ``{{else if …}}`` / ``{{else with …}}``: a nested branch sharing this end.
                self.scopes.pop()
                return BranchNode(
                    kind,
                    pipe,
                    body,
                    [self.parse_branch(str(rest[0].value), rest[1:], stop.pos)],
                    pos,
                )
            if rest:
                raise self.error(f"unexpected {self.describe(rest[0])} after else", stop.pos)
            else_body, end = self.parse_list()
            if end is None or end.tokens[0].value != "end":
                raise self.error(f"{{{{{kind}}}}} has no {{{{end}}}} after its {{{{else}}}}", pos)
            if len(end.tokens) > 1:
                raise self.error("unexpected words after end", end.pos)
            self.i += 1
        elif len(stop.tokens) > 1:
            raise self.error("unexpected words after end", stop.pos)
        self.scopes.pop()
        return BranchNode(kind, pipe, body, else_body, pos)

    # ----------------------------------------------------------------------- pipelines

    def parse_pipe(
        self, tokens: list[Token], pos: int, *, decls_ok: bool = False, in_range: bool = False
    ) -> PipeNode:
        decls: list[str] = []
        assign = False
        k = 0
        if decls_ok and tokens and tokens[0].kind == "VAR":
            names = [tokens[0]]
            j = 1
            if in_range and j + 1 < len(tokens) and tokens[j].kind == "COMMA":
                names.append(tokens[j + 1])
                j += 2
            if j < len(tokens) and tokens[j].kind in ("DECLARE", "ASSIGN"):
                assign = tokens[j].kind == "ASSIGN"
                for t in names:
                    if t.kind != "VAR" or t.value == "$":
                        raise self.error(f"cannot declare {self.describe(t)}", t.pos)
                decls = [str(t.value) for t in names]
                k = j + 1
        rest = tokens[k:]
        cmds = self.parse_commands(rest, pos)
        if assign:
            for name in decls:
                self.lookup(name, pos)
        else:
            self.scopes[-1].extend(decls)
        return PipeNode(cmds, pos, decls, assign)

    def parse_commands(self, tokens: list[Token], pos: int) -> list[CommandNode]:
        if not tokens:
            raise self.error("missing value for command", pos)
        cmds: list[CommandNode] = []
        current: list[Operand] = []
        j = 0
        while j < len(tokens):
            t = tokens[j]
            if t.kind == "PIPE":
                if not current:
                    raise self.error("missing command before |", t.pos)
                cmds.append(CommandNode(current, current[0].pos))
                current = []
                j += 1
                continue
            operand, j = self.parse_operand(tokens, j)
            current.append(operand)
        if not current:
            raise self.error("missing command after |", tokens[-1].pos)
        cmds.append(CommandNode(current, current[0].pos))
        return cmds

    def parse_operand(self, tokens: list[Token], j: int) -> tuple[Operand, int]:
        t = tokens[j]
        node: Operand
        if t.kind == "LPAREN":
            depth, k = 1, j + 1
            while k < len(tokens) and depth:
                depth += {"LPAREN": 1, "RPAREN": -1}.get(tokens[k].kind, 0)
                k += 1
            if depth:
                raise self.error("unclosed left paren", t.pos)
            inner = self.parse_pipe(tokens[j + 1 : k - 1], t.pos)
            names, k = self.chain(tokens, k, tokens[k - 1].end)
            return ChainNode(inner, names, t.pos), k
        if t.kind == "FIELD":
            names, k = self.chain(tokens, j + 1, t.end)
            return FieldNode([str(t.value), *names], t.pos), k
        if t.kind == "VAR":
            self.lookup(str(t.value), t.pos)
            names, k = self.chain(tokens, j + 1, t.end)
            return VariableNode(str(t.value), names, t.pos), k
        if t.kind == "DOT":
            node = DotNode(t.pos)
        elif t.kind == "IDENT":
            if t.value not in self.functions:
                raise self.error(f'function "{t.value}" not defined', t.pos)
            node = IdentifierNode(str(t.value), t.pos)
        elif t.kind in ("STRING", "NUMBER", "BOOL", "NIL"):
            node = LiteralNode(t.value, t.pos)
        else:
            raise self.error(f"unexpected {self.describe(t)} in operand", t.pos)
        if j + 1 < len(tokens) and tokens[j + 1].kind == "FIELD" and tokens[j + 1].pos == t.end:
            raise self.error(f"unexpected {self.describe(tokens[j + 1])} after operand", t.pos)
        return node, j + 1

    def chain(self, tokens: list[Token], k: int, end: int) -> tuple[list[str], int]:
        """Field names written right after an operand (``.A.B`` with no space between)."""
        names: list[str] = []
        while k < len(tokens) and tokens[k].kind == "FIELD" and tokens[k].pos == end:
            names.append(str(tokens[k].value))
            end = tokens[k].end
            k += 1
        return names, k

    def lookup(self, name: str, pos: int) -> None:
        if not any(name in scope for scope in self.scopes):
            raise self.error(f"undefined variable {name!r}", pos)

    def describe(self, t: Token) -> str:
        return repr(self.source[t.pos : t.end])

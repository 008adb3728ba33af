"""Lexing Go ``text/template`` source into text segments and actions.

A template is text with actions between ``{{`` and ``}}``. ``{{- `` trims the whitespace before
the action and `` -}}`` the whitespace after it (the space beside the dash is required, as in
Go). ``{{/* … */}}`` is a comment. Inside an action the lexer yields tokens that carry their
offset in the source, so every later error can name the line and column.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.engine.gotemplate.errors import TemplateSyntaxError

KEYWORDS = frozenset(
    {"if", "else", "end", "range", "with", "break", "continue", "define", "template", "block"}
)
_SPACE = " \t\r\n"
_PUNCT = {"(": "LPAREN", ")": "RPAREN", "|": "PIPE", ",": "COMMA"}


@dataclass(frozen=True, slots=True)
class Token:
    """``kind`` is one of FIELD, VAR, DOT, IDENT, KEYWORD, STRING, NUMBER, BOOL, NIL, LPAREN,
    RPAREN, PIPE, COMMA, DECLARE, ASSIGN; ``value`` is the parsed value (a field's name without
    its dot, a string's text, a number)."""

    kind: str
    value: object
    pos: int
    end: int


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    pos: int


@dataclass(frozen=True, slots=True)
class Action:
    tokens: list[Token]
    pos: int


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def lex(source: str) -> list[Text | Action]:
    """Split ``source`` into text and actions, applying the trim markers."""
    out: list[Text | Action] = []
    i, n = 0, len(source)
    trim_next = False
    while i <= n:
        start = source.find("{{", i)
        text_end = n if start < 0 else start
        text = source[i:text_end]
        if trim_next:
            text = text.lstrip(_SPACE)
        trim_left = (
            start >= 0
            and source.startswith("{{-", start)
            and (start + 3 < n and source[start + 3] in _SPACE)
        )
        if trim_left:
            text = text.rstrip(_SPACE)
        if text:
            out.append(Text(text, i))
        if start < 0:
            break
        j = start + (4 if trim_left else 2)
        action, i, trim_next = _lex_action(source, start, j)
        if action is not None:
            out.append(action)
    return out


def _close_at(source: str, j: int) -> tuple[int, bool] | None:
    """If an action closes at ``j`` (after optional spaces), where its text ends and whether
    it trims what follows."""
    k = j
    while k < len(source) and source[k] in _SPACE:
        k += 1
    if source.startswith("-}}", k) and k > j:
        return k + 3, True
    if source.startswith("}}", k):
        return k + 2, False
    return None


def _lex_action(source: str, start: int, j: int) -> tuple[Action | None, int, bool]:
    n = len(source)
    k = j
    while k < n and source[k] in _SPACE:
        k += 1
    if source.startswith("/*", k) and k == j:
        close = source.find("*/", k + 2)
        if close < 0:
            raise TemplateSyntaxError("unclosed comment", source, k)
        after = _close_at(source, close + 2)
        if after is None:
            raise TemplateSyntaxError("comment ends before closing delimiter", source, close)
        return None, after[0], after[1]
    tokens: list[Token] = []
    while True:
        closed = _close_at(source, j)
        if closed is not None:
            return Action(tokens, start), closed[0], closed[1]
        while j < n and source[j] in _SPACE:
            j += 1
        if j >= n:
            raise TemplateSyntaxError("unclosed action", source, start)
        token = _token(source, j)
        tokens.append(token)
        j = token.end


def _token(source: str, j: int) -> Token:
    ch = source[j]
    n = len(source)
    if ch in _PUNCT:
        return Token(_PUNCT[ch], ch, j, j + 1)
    if source.startswith(":=", j):
        return Token("DECLARE", ":=", j, j + 2)
    if ch == "=":
        return Token("ASSIGN", "=", j, j + 1)
    if ch == "." and j + 1 < n and source[j + 1].isdigit():
        return _number(source, j)
    if ch == ".":
        k = j + 1
        while k < n and _is_ident_char(source[k]):
            k += 1
        if k == j + 1:
            return Token("DOT", ".", j, k)
        return Token("FIELD", source[j + 1 : k], j, k)
    if ch == "$":
        k = j + 1
        while k < n and _is_ident_char(source[k]):
            k += 1
        return Token("VAR", source[j:k], j, k)
    if ch == '"':
        return _quoted(source, j)
    if ch == "`":
        close = source.find("`", j + 1)
        if close < 0:
            raise TemplateSyntaxError("unterminated raw quoted string", source, j)
        return Token("STRING", source[j + 1 : close], j, close + 1)
    if ch == "'":
        return _char(source, j)
    if ch.isdigit() or (
        ch in "+-" and j + 1 < n and (source[j + 1].isdigit() or source[j + 1] == ".")
    ):
        return _number(source, j)
    if _is_ident_char(ch):
        k = j
        while k < n and _is_ident_char(source[k]):
            k += 1
        word = source[j:k]
        if word in ("true", "false"):
            return Token("BOOL", word == "true", j, k)
        if word == "nil":
            return Token("NIL", None, j, k)
        return Token("KEYWORD" if word in KEYWORDS else "IDENT", word, j, k)
    raise TemplateSyntaxError(f"unexpected {ch!r} in action", source, j)


_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
}


def _unescape(source: str, j: int, end: int, quote: str) -> str:
    out: list[str] = []
    k = j
    while k < end:
        ch = source[k]
        if ch != "\\":
            out.append(ch)
            k += 1
            continue
        nxt = source[k + 1] if k + 1 < end else ""
        if nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = source[k + 2 : k + 2 + width]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise TemplateSyntaxError(f"invalid escape \\{nxt}{digits}", source, k) from None
            k += 2 + width
        elif nxt in _ESCAPES and (nxt != "0"):
            out.append(_ESCAPES[nxt])
            k += 2
        else:
            raise TemplateSyntaxError(f"unknown escape sequence \\{nxt}", source, k)
    return "".join(out)


def _quoted(source: str, j: int) -> Token:
    k = j + 1
    while k < len(source):
        if source[k] == "\\":
            k += 2
            continue
        if source[k] == "\n":
            break
        if source[k] == '"':
            return Token("STRING", _unescape(source, j + 1, k, '"'), j, k + 1)
        k += 1
    raise TemplateSyntaxError("unterminated quoted string", source, j)


def _char(source: str, j: int) -> Token:
    close = source.find("'", j + 2 if source[j + 1 : j + 2] == "\\" else j + 1)
    if close < 0:
        raise TemplateSyntaxError("unterminated character constant", source, j)
    text = _unescape(source, j + 1, close, "'")
    if len(text) != 1:
        raise TemplateSyntaxError("invalid character constant", source, j)
    return Token("NUMBER", ord(text), j, close + 1)


def _number(source: str, j: int) -> Token:
    k = j
    n = len(source)
    if source[k] in "+-":
        k += 1
    while k < n and (
        _is_ident_char(source[k])
        or source[k] == "."
        or (source[k] in "+-" and source[k - 1] in "eEpP")
    ):
        k += 1
    text = source[j:k].replace("_", "")
    try:
        value: object = int(text, 0)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise TemplateSyntaxError(f"bad number syntax: {source[j:k]!r}", source, j) from None
    return Token("NUMBER", value, j, k)

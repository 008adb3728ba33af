"""What every command shares: settings from options, the console, exit codes.

Exit codes: 0 success; 1 the operation failed (an error from Cairn or the server);
2 bad usage (Typer's own); 3 configuration error (e.g. a template or ladder file is invalid).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperOption

from cairn.config import Settings
from cairn.errors import CairnError, ConfigError

# Typer shows a "<bool>" placeholder after every on/off flag (``--json <bool>``), as if the flag
# took a value. A flag takes none: show no type for it.
_display_type = TyperOption.display_type_rich


def _flag_without_type(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _display_type(self, ctx)


TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]

PIPED_WIDTH = 200

# Characters that act on a terminal instead of showing: C0 controls but tab and newline, DEL,
# C1 controls (U+009B is a one-character CSI), the line and paragraph separators, and the bidi
# embeddings, overrides and isolates (U+202E shows ``gnp.exe`` as ``exe.png``). Stored text is
# anyone's: printed raw, it could recolour, hide or rewrite what the reader sees.
_ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every character that would act on a terminal shown as its escape
    (``\\x1b``, ``\\u202e``); tabs and newlines kept."""
    return _ACTIVE.sub(_shown, text)


class _Console(Console):
    """Rich's console, printing messages as they are (never broken into lines), laid out
    ``PIPED_WIDTH`` wide when its output is not a terminal (a pipe, a file: rich's default is
    80, so a table lost columns) and ``COLUMNS`` (read as rich reads it, at each print) does
    not say otherwise."""

    def __init__(self, *, stderr: bool) -> None:
        super().__init__(stderr=stderr, soft_wrap=True)
        self._piped = not (sys.stderr if stderr else sys.stdout).isatty()

    def render_str(self, text: str, **options: Any) -> Text:
        """Every string printed (a message, a table's cell) with its terminal controls shown,
        not acted on (``visible``)."""
        return super().render_str(visible(text), **options)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._piped and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(PIPED_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Console(stderr=False)
err_console = _Console(stderr=True)

EXIT_FAILED = 1
EXIT_CONFIG = 3


def esc(value: object) -> str:
    """Text for a rich markup string, printed as is: messages quote patterns like
    ``^[A-Za-z0-9_]*$`` that rich would otherwise take for markup tags and drop."""
    return escape(str(value))


def whole_column(table: Table, header: str, *, width: int = 36) -> None:
    """A column of ids, printed whole: ids are copied into the next command, so they are never
    cut with an ellipsis (other columns give way) and long ones fold onto more lines."""
    table.add_column(header, no_wrap=width <= 36, min_width=width, overflow="fold")


TENANT_HELP = (
    "Tenant to act as. Once API keys exist it needs --database-url (the database's operator); "
    "otherwise the tenant is the --api-key's."
)


def acting_tenant(
    store: Any,
    *,
    tenant: str | None,
    api_key: str | None,
    database_url: str | None,
    configured_key: str = "",
) -> str:
    """The tenant a command works as, by the API's rule: a key decides it; while no key exists
    (open mode) ``--tenant`` or ``default``. Once keys exist, a command without a key must name
    the database (``--database-url``): that is its operator acting, not a caller picking any
    tenant through the configured one."""
    from cairn.core.tenants import DEFAULT_TENANT
    from cairn.errors import InvalidApiKey, MissingApiKey, TenantMismatch

    if api_key:
        found = store.keys.tenant_for(api_key)
        if found is None and not store.keys.any_key_exists():
            return tenant or DEFAULT_TENANT  # open mode takes any key as none, as the API does
        if found is None:
            raise InvalidApiKey("the API key is unknown or revoked")
        if tenant is not None and tenant != found:
            raise TenantMismatch(f"--tenant {tenant!r} is not the API key's tenant ({found!r})")
        return str(found)
    if database_url is None and (configured_key or store.keys.any_key_exists()):
        raise MissingApiKey(
            "API keys exist, so this command needs one: pass --api-key (or set CAIRN_API_KEY); "
            "or, as the database's operator, name it with --database-url and pick --tenant"
        )
    return tenant or DEFAULT_TENANT


def settings_with(**overrides: Any) -> Settings:
    """Settings from the environment, with the non-empty command-line overrides applied; a
    bad value is a configuration error naming its variable (exit 3), not a traceback."""
    values = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            name = ".".join(str(p) for p in e["loc"])
            where = f"--{name.replace('_', '-')}" if name in values else f"CAIRN_{name.upper()}"
            problems.append(f"{where}: {str(e['msg']).removeprefix('Value error, ')}")
        raise fail(ConfigError("; ".join(problems))) from None


def fail(error: Exception) -> typer.Exit:
    """Print an error the same way everywhere and return the exit to raise."""
    if isinstance(error, ConfigError):
        err_console.print(f"[bold red]configuration error:[/] {esc(error)}", highlight=False)
        return typer.Exit(EXIT_CONFIG)
    if isinstance(error, CairnError):
        err_console.print(
            f"[bold red]error[/] ({error.code}): {esc(error.message)}", highlight=False
        )
        return typer.Exit(EXIT_FAILED)
    err_console.print(f"[bold red]error:[/] {esc(error)}", highlight=False)
    return typer.Exit(EXIT_FAILED)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout: text as it is, but the characters that act on a
    terminal (``visible``) as JSON escapes (the same JSON), and all of it as ASCII escapes
    when stdout cannot encode it (``PYTHONIOENCODING=latin-1``)."""
    out = json_line(data, indent=2)
    try:
        out.encode(sys.stdout.encoding or "utf-8")
    except UnicodeEncodeError:
        out = json.dumps(data, indent=2, default=str)
    sys.stdout.write(out + "\n")


def json_line(record: Any, indent: int | None = None) -> str:
    """``record`` as JSON (one line unless ``indent``), text as it is but the characters that
    act on a terminal as JSON escapes (the same JSON): an export printed to a terminal shows
    them."""
    dumped = json.dumps(record, indent=indent, default=str, ensure_ascii=False)
    return _ACTIVE.sub(_json_escape, dumped)


def write_text(text: str) -> None:
    """Stored or generated text as it is (``context --text``, ``slates read``, a ladder's
    reply): exact when piped (to a model, a file), with terminal controls shown as escapes
    (``visible``) on a terminal. Never through rich, which replaces ``:emoji:`` codes and
    expands tabs."""
    out = sys.stdout
    out.write(visible(text) if out.isatty() else text)
    out.flush()


def _json_escape(match: re.Match[str]) -> str:
    # Only inside strings: JSON's own syntax is ASCII without controls.
    return f"\\u{ord(match.group()):04x}"


def prepare_process() -> None:
    """Make the command's text paths hold every script whatever the locale says.

    Output: a stream whose encoding cannot show a character (``PYTHONIOENCODING=latin-1``, a
    C locale without UTF-8 mode) writes it as a backslash escape instead of failing with a
    traceback. Arguments: under such a locale Python decodes them as ASCII, keeping each
    non-ASCII byte as a lone surrogate (``李雷`` read as six of them, then refused as
    invalid text); an argument whose bytes are UTF-8 is read as UTF-8."""
    for stream in (sys.stdout, sys.stderr):
        if not _is_utf8(getattr(stream, "encoding", None)):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
    sys.argv[1:] = [_utf8_argument(arg) for arg in sys.argv[1:]]


def _utf8_argument(arg: str) -> str:
    if arg.isascii() or _is_utf8(sys.getfilesystemencoding()):
        return arg
    try:
        return os.fsencode(arg).decode("utf-8")
    except UnicodeError:
        return arg  # not UTF-8 either: left to the command's own check


def _is_utf8(encoding: str | None) -> bool:
    return (encoding or "").lower().replace("-", "").replace("_", "") == "utf8"

"""The board: one per request, the variables that carry values between hooks and steps.

Hooks and steps read and write board variables by name. Names starting with ``__`` are the
engine's (reserved): hooks and ladder files may read them but only the runtime sets them.

Engine variables set by the runtime:

========================  ==========================================================
``__run_id``              the run id (the ``Idempotency-Key`` header, else generated)
``__ladder``              the ladder's name
``__context_id``          the request's conversation (context) id
``__user_id``             the request's user (``user`` in the body), or ``""``
``__messages``            the request's messages, ``[{"role", "content"}, ...]``
``__current_message``     the text of the last user message
``__main_channel``        the turn as messages: the last user message, then the reply
                          (set after the last step, before commit hooks run)
``__reply``               the reply text (after the last step)
``__steps``               ``{step_id: output}`` of the steps that have run
========================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.errors import InvalidInput

RESERVED_PREFIX = "__"

RUN_ID = "__run_id"
LADDER = "__ladder"
CONTEXT_ID = "__context_id"
USER_ID = "__user_id"
MESSAGES = "__messages"
CURRENT_MESSAGE = "__current_message"
MAIN_CHANNEL = "__main_channel"
REPLY = "__reply"
STEPS = "__steps"
# Each step's whole reply (``STEPS`` holds what later steps and the caller see: with
# ``stripMatch``, less the JSON its ``slateWrite`` matched, which a recordTemplate reads).
STEP_REPLIES = "__step_replies"


def is_reserved(name: str) -> bool:
    """True for engine-owned names (the ``__`` prefix)."""
    return name.startswith(RESERVED_PREFIX)


def check_variable_name(name: str) -> str:
    """Validate a name that a hook or ladder may write: non-empty, not reserved."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("a board variable name must not be empty", code="invalid_board_variable")
    if is_reserved(name):
        raise InvalidInput(
            f"board variable {name!r} is reserved: names starting with '__' belong to the engine",
            code="reserved_board_variable",
        )
    return name


@dataclass
class Board:
    """The variables of one request. ``set`` is for hooks and steps, ``set_engine`` for the
    runtime; ``get`` reads either kind."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def set(self, name: str, value: Any) -> None:
        """Set a non-reserved variable (hooks, steps)."""
        self.values[check_variable_name(name)] = value

    def set_engine(self, name: str, value: Any) -> None:
        """Set an engine variable (``__`` names) or any other; the runtime's own door."""
        self.values[name] = value

    def user_variables(self) -> dict[str, Any]:
        """The non-reserved variables (what hooks and steps wrote)."""
        return {k: v for k, v in self.values.items() if not is_reserved(k)}

    def snapshot(self) -> dict[str, Any]:
        return dict(self.values)

    # Shortcuts for the engine variables every hook needs.
    @property
    def run_id(self) -> str:
        return str(self.values.get(RUN_ID, ""))

    @property
    def context_id(self) -> str:
        return str(self.values.get(CONTEXT_ID, ""))

    @property
    def current_message(self) -> str:
        return str(self.values.get(CURRENT_MESSAGE, ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.values.get(MESSAGES, []))

    @classmethod
    def for_request(
        cls,
        *,
        run_id: str,
        ladder: str,
        messages: Sequence[Mapping[str, Any]],
        context_id: str = "",
        user_id: str = "",
    ) -> Board:
        """A fresh board with the engine variables of a request."""
        msgs = [dict(m) for m in messages]
        board = cls()
        board.set_engine(RUN_ID, run_id)
        board.set_engine(LADDER, ladder)
        board.set_engine(CONTEXT_ID, context_id)
        board.set_engine(USER_ID, user_id)
        board.set_engine(MESSAGES, msgs)
        board.set_engine(CURRENT_MESSAGE, last_user_text(msgs))
        board.set_engine(STEPS, {})
        board.set_engine(STEP_REPLIES, {})
        return board


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last ``user`` message ('' when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: a string ``content``, or the text parts of a list ``content``."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text"
        ]
        return "\n".join(parts)
    return str(content)


__all__ = [
    "CONTEXT_ID",
    "CURRENT_MESSAGE",
    "LADDER",
    "MAIN_CHANNEL",
    "MESSAGES",
    "REPLY",
    "RUN_ID",
    "STEPS",
    "USER_ID",
    "Board",
    "check_variable_name",
    "is_reserved",
    "last_user_text",
    "message_text",
]
